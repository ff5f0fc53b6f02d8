"""`/edit` and the Edit button through the real discord.py against the fake Discord: the
slash command with its `id` and `text` options (ephemeral in a server, nothing posted in
the channel), its Undo, and the Edit button that takes the next DM as the new text."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.bootstrap import Core
from tests.e2e.test_discord_bot import ALICE, point_at, replies_in, running
from tests.e2e.test_discord_commands import memory_of, press, remember
from tests.e2e.test_discord_interactions import answered, message_of
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.discord_api import GUILD_CHANNEL_ID, FakeDiscord, SentMessage


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


async def edit(fake: FakeDiscord, memory_id: str, new_text: str, *, guild: bool) -> SentMessage:
    """Alice runs `/edit` with its two options; its (deferred, then followed-up) answer."""
    options = {"id": memory_id, "text": new_text}
    interaction = await fake.slash("edit", options, user_id=ALICE, guild=guild)
    deferred, followup = await answered(fake, interaction)
    assert (deferred.type, deferred.ephemeral, followup.ephemeral) == (5, guild, guild)
    return message_of(followup)


async def test_edit_in_a_server_is_ephemeral_and_undoable(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    await remember(core, fake, ALICE, "I work at Acme")

    answer = await edit(fake, "m1", "I work at Globex", guild=True)

    assert answer.content.startswith("Updated: “I work at Globex” (now m2")
    assert answer.ephemeral_flag and answer.labels == ["↩ Undo"]
    edited = await memory_of(core, 2)
    assert (edited.content, edited.source, edited.live) == ("I work at Globex", "user", True)
    assert not (await memory_of(core, 1)).live

    kind, undone = await press(fake, answer, "Undo")
    assert (kind, undone.id) == ("edit", answer.id)
    assert (await memory_of(core, 1)).live and not (await memory_of(core, 2)).live
    assert fake.sent_to(GUILD_CHANNEL_ID) == []


async def test_a_bad_id_in_a_server_changes_nothing(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    await remember(core, fake, ALICE, "I work at Acme")
    answer = await edit(fake, "m9", "I work at Globex", guild=True)
    assert answer.content.startswith("I have no memory m9") and answer.ephemeral_flag
    assert (await memory_of(core, 1)).live
    assert fake.sent_to(GUILD_CHANNEL_ID) == []


async def test_the_edit_button_takes_the_next_dm_as_the_new_text(
    bot: None, fake: FakeDiscord, core: Core, scripted_llm: ScriptedLLM
) -> None:
    await remember(core, fake, ALICE, "I work at Acme")
    interaction = await fake.slash("memory", None, user_id=ALICE, guild=False)
    _, followup = await answered(fake, interaction)
    page = message_of(followup)

    _, picker = await press(fake, page, "✏️ Edit", guild=False)
    assert picker.content.startswith("Which one should I change?")
    _, asked = await press(fake, picker, "✏️ m1", guild=False)
    assert "What should m1 say instead of “I work at Acme”?" in asked.content

    await fake.dm(ALICE, "I work at Globex now")
    [reply] = await replies_in(fake, fake.dm_channel(ALICE))
    assert reply.content.startswith("Updated: “I work at Globex now”")
    assert scripted_llm.chat_requests == []  # not answered as conversation
    assert (await memory_of(core, 2)).content == "I work at Globex now"
