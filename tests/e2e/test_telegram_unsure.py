""" "Did I get this right?" through Telegram: the question about an unsure memory arrives
in the private chat with ✓ / ✗ / Edit, at most one a day; ✓ affirms the memory, ✗
forgets it, Edit takes the next message as its new text. What each press did is checked
in the database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.telegram_bot import TelegramAdapter
from bot.bootstrap import Core
from memory.store.items import Candidate, MemoryItem
from tests.conftest import FakeClock
from tests.e2e.test_telegram import ALICE, identity, running
from tests.e2e.test_telegram_commands import button
from tests.fakes.telegram_api import FakeTelegramAPI, SentMessage

UNSURE = (
    "The person may be taking up the cello",
    "The person might sell their old violin",
    "The person may move to Porto next year",
)


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


async def press(fake: FakeTelegramAPI, message: SentMessage, word: str) -> None:
    """Alice presses the button labelled with `word`; wait until the query is answered."""
    query_id = fake.push_callback(
        ALICE, button(message, word), message.message_id, chat_id=message.chat_id
    )
    await fake.wait_for(
        lambda: any(a["callback_query_id"] == query_id for a in fake.callback_answers)
    )


async def asked(core: Core, fake: FakeTelegramAPI, user_id: int, count: int) -> SentMessage:
    """The companion asks about one unsure memory; the `count`th message Alice got."""
    (person,) = await core.store.persons_by_ids([user_id])
    assert await core.memory.ask_unsure(person)
    sent = await fake.wait_for_sent(ALICE, count)
    return sent[-1]


async def memory(core: Core, user_id: int, short_id: int) -> MemoryItem:
    item = await core.memories.get(user_id, short_id)
    assert item is not None
    return item


async def test_an_unsure_memory_is_confirmed_rejected_or_corrected_with_its_buttons(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    clock: FakeClock,
    db: async_sessionmaker[AsyncSession],
) -> None:
    fake.push_message(ALICE, "/timezone UTC")
    await fake.wait_for_sent(ALICE, 1)
    user_id = (await identity(db, ALICE)).user_id
    for content in UNSURE:
        candidate = Candidate(content, "fact", "core", 6, 0.6, unsure=True)
        await core.memories.add(user_id, candidate, source="extracted", actor="extraction")

    question = await asked(core, fake, user_id, 2)
    assert question.text.startswith(f"Did I get this right? I noted “{UNSURE[0]}” (m1)")
    assert [label for row in question.buttons for label, _ in row] == [
        "✓ Yes",
        "✗ No",
        "✏️ Edit",
    ]
    (person,) = await core.store.persons_by_ids([user_id])
    assert not await core.memory.ask_unsure(person)  # one question a day
    await press(fake, question, "✓")
    await fake.wait_for(lambda: question.text.startswith("Thanks — I'll keep it in mind"))
    cello = await memory(core, user_id, 1)
    assert (cello.unsure, cello.confidence, cello.last_confirmed_at) == (False, 0.75, clock.now())

    clock.advance(days=1)
    question = await asked(core, fake, user_id, 3)
    assert UNSURE[1] in question.text
    await press(fake, question, "✗")
    await fake.wait_for(lambda: question.text.startswith("Forgotten:"))
    assert (await memory(core, user_id, 2)).status == "forgotten"

    clock.advance(days=1)
    question = await asked(core, fake, user_id, 4)
    assert UNSURE[2] in question.text
    await press(fake, question, "Edit")
    await fake.wait_for(lambda: question.text.startswith("What should m3 say instead"))
    fake.push_message(ALICE, "I may move to Lisbon next year")
    await fake.wait_for_sent(ALICE, 5)
    old = await memory(core, user_id, 3)
    assert old.superseded_by is not None and not old.live
    new = await memory(core, user_id, 4)
    assert new.content == "I may move to Lisbon next year"
    assert (new.unsure, new.source) == (False, "user")
