"""The core's real commands and buttons through Discord's slash commands: `/memory`
paging, `/forget` and undo, `/pin`, `/forget all`, `/export` as an attachment, expired
buttons; in a server every answer is ephemeral and nothing is posted in the channel.

Memories are seeded through the real core (`/remember`); what the buttons did is checked
in the database, not only in what the person sees.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.domain import IncomingMessage
from memory.care.erasure import count_person_data
from memory.store.items import MemoryItem
from memory.store.tables import Identity
from tests.conftest import FakeClock
from tests.e2e.test_discord_bot import ALICE, BOB, point_at, replies_in, running
from tests.e2e.test_discord_interactions import answered, message_of
from tests.fakes.discord_api import GUILD_CHANNEL_ID, FakeDiscord, SentMessage

FACTS = [f"note {i:02d}: I like fact number {i:02d}" for i in range(1, 13)]


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


async def remember(core: Core, fake: FakeDiscord, user: int, *facts: str) -> None:
    """Save facts for a Discord user through the core's own `/remember`."""
    for fact in facts:
        incoming = IncomingMessage(
            platform="discord",
            platform_user_id=str(user),
            text=f"/remember {fact}",
            chat_id=str(fake.dm_channel(user)),
            is_private=True,
        )
        await core.router.handle(incoming)


async def person(core: Core, user: int) -> int:
    """The core's id of a Discord user."""
    async with core.sessions() as db:
        found = await db.scalar(
            select(Identity.user_id).where(
                Identity.platform == "discord", Identity.platform_user_id == str(user)
            )
        )
    assert found is not None
    return found


async def memory_of(core: Core, short_id: int) -> MemoryItem:
    """Alice's memory `m<short_id>`, as stored now."""
    item = await core.memories.get(await person(core, ALICE), short_id)
    assert item is not None
    return item


def button(message: SentMessage, word: str) -> str:
    """The custom id of the one button whose label contains `word`."""
    pairs = zip(message.labels, message.custom_ids, strict=True)
    [found] = [custom_id for label, custom_id in pairs if word in label]
    return found


def facts_in(text: str) -> set[str]:
    """Which of the seeded facts a message shows."""
    return {fact for fact in FACTS if fact in text}


async def command(
    fake: FakeDiscord, name: str, argument: str | None = None, *, guild: bool = True
) -> SentMessage:
    """Alice runs a slash command; its (deferred, then followed-up) answer."""
    options = None
    if argument is not None:
        option = {"forget": "what", "pin": "what", "unpin": "what"}[name]
        options = {option: argument}
    interaction = await fake.slash(name, options, user_id=ALICE, guild=guild)
    deferred, followup = await answered(fake, interaction)
    assert (deferred.type, deferred.ephemeral, followup.ephemeral) == (5, guild, guild)
    return message_of(followup)


async def press(
    fake: FakeDiscord, message: SentMessage, word: str, *, guild: bool = True
) -> tuple[str, SentMessage]:
    """Alice presses the button labelled with `word`: how it was answered, and with what."""
    interaction = await fake.press(message, button(message, word), user_id=ALICE, guild=guild)
    deferred, answer = await answered(fake, interaction)
    assert (deferred.kind, deferred.type) == ("callback", 6)
    return answer.kind, message_of(answer)


async def test_memory_in_a_server_pages_forward_and_back_ephemerally(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    await remember(core, fake, ALICE, *FACTS)

    page = await command(fake, "memory")
    first = facts_in(page.content)
    assert len(first) == 10 and page.ephemeral_flag
    assert not any("Previous" in label for label in page.labels)

    kind, second = await press(fake, page, "Next")
    assert (kind, second.id) == ("edit", page.id)
    assert facts_in(second.content) == set(FACTS) - first and second.ephemeral_flag
    assert not any("Next" in label for label in second.labels)

    kind, back = await press(fake, second, "Previous")
    assert (kind, back.id) == ("edit", page.id)
    assert facts_in(back.content) == first
    assert fake.sent_to(GUILD_CHANNEL_ID) == []


async def test_forget_then_undo_changes_the_database(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    await remember(core, fake, ALICE, "my ex is called Tom", "I love hiking")

    forgotten = await command(fake, "forget", "m1", guild=False)
    item = await memory_of(core, 1)
    assert (item.live, item.status) == (False, "forgotten")
    assert (await memory_of(core, 2)).live

    kind, undone = await press(fake, forgotten, "Undo", guild=False)

    assert (kind, undone.id) == ("edit", forgotten.id)
    restored = await memory_of(core, 1)
    assert restored.live and restored.content == "my ex is called Tom"
    assert undone.components == []


async def test_pin_then_undo_and_unpin(bot: None, fake: FakeDiscord, core: Core) -> None:
    await remember(core, fake, ALICE, "my sister is called Maja", "I play the cello")

    pinned = await command(fake, "pin", "m1")
    assert (await memory_of(core, 1)).pinned
    await press(fake, pinned, "Undo")
    assert not (await memory_of(core, 1)).pinned

    await command(fake, "pin", "m2")
    assert (await memory_of(core, 2)).pinned
    await command(fake, "unpin", "m2")
    item = await memory_of(core, 2)
    assert item.live and not item.pinned
    assert fake.sent_to(GUILD_CHANNEL_ID) == []


async def test_forget_all_erases_only_the_persons_rows_after_confirmation(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    await remember(core, fake, ALICE, "I live in Aarhus")
    await remember(core, fake, BOB, "I collect stamps")
    await fake.dm(ALICE, "hello")
    await replies_in(fake, fake.dm_channel(ALICE))
    alice, bob = await person(core, ALICE), await person(core, BOB)
    before = await count_person_data(core.sessions, user_id=bob)
    assert (await count_person_data(core.sessions, user_id=alice))["messages"] >= 2

    question = await command(fake, "forget", "all")
    assert (await count_person_data(core.sessions, user_id=alice))["memories"] == 1
    kind, done = await press(fake, question, "Yes")

    assert (kind, done.id) == ("edit", question.id) and done.components == []
    assert all(n == 0 for n in (await count_person_data(core.sessions, user_id=alice)).values())
    assert await count_person_data(core.sessions, user_id=bob) == before
    assert fake.sent_to(GUILD_CHANNEL_ID) == []


async def test_export_is_a_json_attachment_of_the_persons_data_only(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    await remember(core, fake, ALICE, "I love green tea")
    await remember(core, fake, BOB, "I collect rare stamps")
    await fake.dm(BOB, "my secret word is marmalade")
    await replies_in(fake, fake.dm_channel(BOB))
    await fake.dm(ALICE, "good morning")
    await replies_in(fake, fake.dm_channel(ALICE))

    export = await command(fake, "export")

    [(filename, content)] = export.files.items()
    assert filename.endswith(".json") and export.ephemeral_flag
    raw = content.decode()
    data = json.loads(raw)
    assert [m["content"] for m in data["memories"]] == ["I love green tea"]
    assert "good morning" in [m["content"] for m in data["messages"]]
    assert [i["platform_user_id"] for i in data["identities"]] == [str(ALICE)]
    assert "stamps" not in raw and "marmalade" not in raw
    assert fake.sent_to(GUILD_CHANNEL_ID) == []


async def test_expired_buttons_are_answered_with_the_stale_message(
    bot: None, fake: FakeDiscord, core: Core, clock: FakeClock
) -> None:
    await remember(core, fake, ALICE, *FACTS)
    page = await command(fake, "memory")
    question = await command(fake, "forget", "all")

    clock.advance(minutes=11)  # past the confirmation's ten minutes
    kind, refused = await press(fake, question, "Yes")
    assert (kind, refused.content, refused.ephemeral_flag) == ("followup", STALE_BUTTON, True)
    clock.advance(days=7)  # past the page buttons' week
    kind, stale = await press(fake, page, "Next")
    assert (kind, stale.content, stale.ephemeral_flag) == ("followup", STALE_BUTTON, True)

    counts = await count_person_data(core.sessions, user_id=await person(core, ALICE))
    assert counts["memories"] == len(FACTS)
    assert fake.sent_to(GUILD_CHANNEL_ID) == []
