"""Discord slash commands and buttons end to end: every catalog command, deferred and
answered ephemerally in servers; persistent buttons routed to the core (also after a
restart), forged ones refused clearly; files as attachments.

The flows use small handlers registered on the test's own core, so they exercise the
adapter's plumbing whatever the real commands say; `test_discord_commands` runs the
core's real commands and buttons.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import structlog.testing

from adapters.discord_bot.slash_commands import UNKNOWN_COMMAND
from bot.bootstrap import Core
from bot.commands.catalog import COMMANDS
from bot.commands.router import STALE_BUTTON, Handler, PressHandler
from bot.domain import Button, ButtonPress, Document, IncomingMessage, Reply
from tests.e2e.test_discord_bot import ALICE, BOB, point_at, replies_in, running
from tests.fakes.discord_api import GUILD_CHANNEL_ID, FakeDiscord, InteractionReply, SentMessage


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """The fake Discord (REST and gateway) on a loopback port."""
    async with FakeDiscord() as api:
        yield api


@pytest.fixture
async def bot(core: Core, fake: FakeDiscord) -> AsyncIterator[None]:
    """The adapter, running against the fake."""
    point_at(core, fake)
    async with running(core, fake):
        yield


def record_commands(core: Core) -> list[str]:
    """Route every catalog command to a recorder; returns what reached the router."""
    seen: list[str] = []

    def recorder(name: str) -> Handler:
        async def handle(incoming: IncomingMessage, args: str) -> Reply:
            seen.append(incoming.text)
            return Reply(f"done: {name}", private=True)

        return handle

    for info in COMMANDS:
        core.router.register(info.name, recorder(info.name))
    return seen


async def answered(fake: FakeDiscord, interaction: int, count: int = 2) -> list[InteractionReply]:
    """Wait until an interaction got `count` answers (callback, followups, edits)."""
    return await fake.wait_for(
        lambda: len(fake.replies_to(interaction)) >= count and fake.replies_to(interaction)
    )


async def test_every_catalog_command_in_a_server_is_answered_ephemerally(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    seen = record_commands(core)
    for info in COMMANDS:
        options = {info.argument: "m12 tea"} if info.argument else None
        if info.argument and info.text_option:  # /edit takes the id and the text apart
            options = {info.argument: "m12", info.text_option: "tea"}
        interaction = await fake.slash(info.name, options, user_id=BOB, guild=True)

        deferred, followup = await answered(fake, interaction)

        assert (deferred.kind, deferred.type, deferred.ephemeral) == ("callback", 5, True)
        assert followup.kind == "followup" and followup.ephemeral
        assert followup.message is not None and followup.message.content == f"done: {info.name}"
    assert seen == [f"/{i.name} m12 tea" if i.argument else f"/{i.name}" for i in COMMANDS]
    assert fake.sent_to(GUILD_CHANNEL_ID) == []


async def test_a_command_in_the_bots_dm_is_not_ephemeral(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    seen = record_commands(core)
    interaction = await fake.slash("memory", user_id=ALICE, guild=False)

    deferred, followup = await answered(fake, interaction)
    assert not deferred.ephemeral and not followup.ephemeral
    assert seen == ["/memory"]


async def test_a_command_this_build_does_not_know_gets_a_short_answer(
    bot: None, fake: FakeDiscord
) -> None:
    interaction = await fake.slash("teleport", user_id=BOB, guild=True)

    [answer] = await answered(fake, interaction, 1)
    assert (answer.type, answer.ephemeral) == (4, True)
    assert message_of(answer).content == UNKNOWN_COMMAND


def paging(pages: int) -> tuple[Handler, PressHandler]:
    """A `/memory` with pages and its `pg:` buttons: ◀ / ▶ between numbered pages."""

    def page(number: int) -> Reply:
        buttons = []
        if number > 1:
            buttons.append(Button("◀ Back", f"pg:{number - 1}"))
        if number < pages:
            buttons.append(Button("Next ▶", f"pg:{number + 1}"))
        return Reply(f"Page {number} of {pages}", buttons=(tuple(buttons),), private=True)

    async def command(incoming: IncomingMessage, args: str) -> Reply:
        return page(1)

    async def press(press: ButtonPress, rest: str) -> Reply:
        return page(int(rest))

    return command, press


def message_of(reply: InteractionReply) -> SentMessage:
    assert reply.message is not None
    return reply.message


async def test_pagination_edits_the_ephemeral_message_in_place(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    command, press = paging(3)
    core.router.register("memory", command)
    core.router.register_press("pg", press)
    interaction = await fake.slash("memory", user_id=BOB, guild=True)
    first = message_of((await answered(fake, interaction))[1])
    assert first.content == "Page 1 of 3" and first.custom_ids == ["pg:2"]
    assert first.ephemeral_flag

    pressed = await fake.press(first, "pg:2", user_id=BOB, guild=True)
    deferred, edit = await answered(fake, pressed)
    assert (deferred.kind, deferred.type) == ("callback", 6)
    assert edit.kind == "edit" and message_of(edit).id == first.id
    assert message_of(edit).content == "Page 2 of 3"
    assert message_of(edit).labels == ["◀ Back", "Next ▶"]


def undoable(log: list[str]) -> tuple[Handler, PressHandler]:
    """`/forget` asks to confirm; Yes forgets with an Undo button; Undo restores."""

    async def command(incoming: IncomingMessage, args: str) -> Reply:
        buttons = (Button("Yes, forget", "fg:yes"), Button("Keep it", "fg:no"))
        return Reply(f"Forget “{args}”?", buttons=(buttons,), private=True)

    async def press(press: ButtonPress, rest: str) -> Reply:
        log.append(rest)
        if rest == "yes":
            return Reply("Forgotten.", buttons=((Button("Undo", "fg:undo"),),), private=True)
        return Reply("Restored." if rest == "undo" else "Kept.", private=True)

    return command, press


async def test_confirm_then_undo_and_presses_survive_a_restart(
    fake: FakeDiscord, core: Core
) -> None:
    actions: list[str] = []
    command, press = undoable(actions)
    core.router.register("forget", command)
    core.router.register_press("fg", press)
    point_at(core, fake)
    async with running(core, fake):
        interaction = await fake.slash("forget", {"what": "tea"}, user_id=ALICE, guild=False)
        question = message_of((await answered(fake, interaction))[1])
        assert question.labels == ["Yes, forget", "Keep it"]
        pressed = await fake.press(question, "fg:yes", user_id=ALICE)
        forgotten = message_of((await answered(fake, pressed))[1])
        assert forgotten.content == "Forgotten." and forgotten.custom_ids == ["fg:undo"]

    with structlog.testing.capture_logs() as logs:
        async with running(core, fake):  # a new process: no view was re-added by hand
            pressed = await fake.press(forgotten, "fg:undo", user_id=ALICE)
            restored = message_of((await answered(fake, pressed))[1])

    assert restored.content == "Restored." and restored.components == []
    assert actions == ["yes", "undo"]
    events = [entry["event"] for entry in logs]
    assert "discord.press_answered" in events
    assert "discord.press_unmatched" not in events  # dispatched by the registered DynamicItem


async def test_a_forged_or_stale_button_gets_a_clear_ephemeral_answer(
    bot: None, fake: FakeDiscord
) -> None:
    forged = SentMessage(id=fake.snowflake(), channel_id=GUILD_CHANNEL_ID, content="Old menu")
    forged.components = [
        {"type": 1, "components": [{"type": 2, "style": 2, "label": "Go", "custom_id": "zz:1"}]}
    ]
    pressed = await fake.press(forged, "zz:1", user_id=BOB, guild=True)
    not_on_message = await fake.press(forged, "mystery", user_id=BOB, guild=True)

    for interaction in (pressed, not_on_message):
        deferred, answer = await answered(fake, interaction)
        assert deferred.type == 6
        assert answer.kind == "followup" and answer.ephemeral
        assert message_of(answer).content == STALE_BUTTON


async def test_a_personal_answer_to_a_public_button_is_ephemeral(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    async def peek(press: ButtonPress, rest: str) -> Reply:
        return Reply("You told me you love tea.", private=True)

    async def quiz(incoming: IncomingMessage, args: str) -> Reply:
        return Reply("Want to see what I know?", buttons=((Button("Show me", "pk:1"),),))

    core.router.register("quiz", quiz)
    core.router.register_press("pk", peek)
    await fake.guild_message(BOB, "/quiz", mention=True)
    [public] = await replies_in(fake, GUILD_CHANNEL_ID)
    assert public.custom_ids == ["pk:1"] and not public.ephemeral_flag

    pressed = await fake.press(public, "pk:1", user_id=BOB, guild=True)

    answer = (await answered(fake, pressed))[1]
    assert answer.kind == "followup" and answer.ephemeral
    assert message_of(answer).content == "You told me you love tea."
    assert len(fake.sent_to(GUILD_CHANNEL_ID)) == 1


async def test_an_export_arrives_as_a_file(bot: None, fake: FakeDiscord, core: Core) -> None:
    document = Document("companion-export.json", b'{"memories": []}')

    async def export(incoming: IncomingMessage, args: str) -> Reply:
        return Reply("Here is everything I keep about you.", document=document, private=True)

    core.router.register("export", export)
    interaction = await fake.slash("export", user_id=BOB, guild=True)
    followup = (await answered(fake, interaction))[1]
    assert followup.ephemeral
    assert message_of(followup).files == {"companion-export.json": b'{"memories": []}'}

    await fake.dm(ALICE, "/export")
    [message] = await replies_in(fake, fake.dm_channel(ALICE))
    assert message.files == {"companion-export.json": b'{"memories": []}'}
