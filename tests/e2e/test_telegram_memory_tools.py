"""The chat model's memory tools through the real python-telegram-bot against the fake
Bot API: a protected memory is left alone until the person's message says so, then the
reply carries the note of what changed with its Undo button, and pressing it undoes the
change."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.telegram_bot import TelegramAdapter
from bot.bootstrap import Core
from bot.commands.notices import TOOL_HEADING
from tests.e2e.test_telegram import ALICE, running
from tests.e2e.test_telegram_commands import changed, memory_of, press, remember
from tests.fakes.chat_llm import ScriptedLLM, text, tool_call
from tests.fakes.telegram_api import FakeTelegramAPI


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


async def test_an_update_by_the_model_shows_a_note_whose_undo_works(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
) -> None:
    await remember(core, ALICE, "I work at Acme")
    scripted_llm.script += [
        tool_call("update_memory", {"memory": "m1", "text": "I work at Globex"}),  # protected
        text("Shall I update that?"),
        tool_call("update_memory", {"memory": "m1", "text": "I work at Globex"}),
        text("Updated — congrats on Globex!"),
    ]
    fake.push_message(ALICE, "I left Acme for Globex")
    [asked] = await fake.wait_for_sent(ALICE)
    assert asked.text.startswith("Shall I update that?") and TOOL_HEADING not in asked.text
    assert (await memory_of(core, db, 1)).live

    fake.push_message(ALICE, "yes, update m1 please")
    [_, message] = await fake.wait_for_sent(ALICE, 2)
    assert message.text.startswith(f"Updated — congrats on Globex!\n\n{TOOL_HEADING}")
    assert [label for row in message.buttons for label, _ in row] == ["↩ Undo m2"]
    assert (await memory_of(core, db, 2)).content == "I work at Globex"

    await press(fake, message, "↩ Undo")
    await changed(fake, message, 1)
    assert (await memory_of(core, db, 1)).live and not (await memory_of(core, db, 2)).live
