"""`/edit` and the Edit button through the real python-telegram-bot against the fake Bot
API: the edit and its Undo, the button that waits for the next private message, `/edit`
asked in a group answered in private, and the command menu."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.telegram_bot import TelegramAdapter
from adapters.telegram_bot.handlers import SENT_PRIVATELY
from bot.bootstrap import Core
from tests.e2e.test_telegram import ALICE, identity, running
from tests.e2e.test_telegram_commands import GROUP, changed, memory_of, press, remember
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.timezone_question import plain


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    """The fake Bot API."""
    async with FakeTelegramAPI() as api:
        yield api


@pytest.fixture
async def adapter(core: Core, fake: FakeTelegramAPI) -> AsyncIterator[TelegramAdapter]:
    """The adapter, polling the fake."""
    async with running(core, fake) as started:
        yield started


async def test_edit_then_undo_changes_the_database(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    db: async_sessionmaker[AsyncSession],
) -> None:
    await remember(core, ALICE, "I work at Acme")

    fake.push_message(ALICE, "/edit m1 I work at Globex")
    [message] = await fake.wait_for_sent(ALICE)
    assert message.text.startswith("Updated: “I work at Globex” (now m2")
    assert [label for row in message.buttons for label, _ in row] == ["↩ Undo"]
    assert not (await memory_of(core, db, 1)).live
    edited = await memory_of(core, db, 2)
    assert (edited.content, edited.source, edited.live) == ("I work at Globex", "user", True)

    await press(fake, message, "Undo")
    await changed(fake, message, 1)
    assert (await memory_of(core, db, 1)).live and not (await memory_of(core, db, 2)).live
    assert "I work at Acme" in message.text and message.buttons == []


async def test_the_edit_button_takes_the_next_message_as_the_new_text(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
) -> None:
    await remember(core, ALICE, "I work at Acme")
    fake.push_message(ALICE, "/memory")
    [page] = await fake.wait_for_sent(ALICE)

    await press(fake, page, "✏️ Edit")
    await changed(fake, page, 1)
    assert page.text.startswith("Which one should I change?")
    await press(fake, page, "✏️ m1")
    await changed(fake, page, 2)
    assert "What should m1 say instead of “I work at Acme”?" in page.text

    fake.push_message(ALICE, "I work at Globex now")
    [_, answer] = await fake.wait_for_sent(ALICE, 2)
    assert answer.text.startswith("Updated: “I work at Globex now”")
    assert scripted_llm.chat_requests == []  # not answered as conversation
    assert (await memory_of(core, db, 2)).content == "I work at Globex now"

    fake.push_message(ALICE, "thanks!")
    [*_, reply] = await fake.wait_for_sent(ALICE, 3)
    assert plain(reply.text) == "Tell me more." and len(scripted_llm.chat_requests) == 1


async def test_edit_asked_in_a_group_is_answered_in_private(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    db: async_sessionmaker[AsyncSession],
) -> None:
    await remember(core, ALICE, "I work at Acme")
    fake.start_chat(ALICE)

    fake.push_message(ALICE, "/edit m1 I work at Globex", chat_id=GROUP, chat_type="supergroup")
    [private] = await fake.wait_for_sent(ALICE)
    [notice] = await fake.wait_for_sent(GROUP)

    assert private.text.startswith("Updated: “I work at Globex”")
    assert notice.text == SENT_PRIVATELY and notice.buttons == []
    assert (await memory_of(core, db, 2)).content == "I work at Globex"
    assert (await identity(db, ALICE)).chat_id == str(ALICE)


async def test_the_command_menu_offers_edit_and_cancel(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    menu = {c["command"]: c["description"] for c in fake.commands}
    assert menu["edit"] == "Correct a memory"
    assert menu["cancel"] == "Stop waiting for a memory's new text"
