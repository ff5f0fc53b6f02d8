"""The core's real commands and buttons through Telegram: `/memory` paging, `/forget` and
undo, `/pin`, `/forget all`, `/export` as a document, expired buttons, and `/memory` asked
in a group answered in the private chat.

Memories are seeded through the real core (`/remember`); what the buttons did is checked
in the database, not only in what the person sees.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.telegram_bot import TelegramAdapter
from adapters.telegram_bot.handlers import SENT_PRIVATELY
from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.domain import IncomingMessage
from memory.care.erasure import count_person_data
from memory.store.items import MemoryItem
from memory.store.tables import User
from tests.conftest import FakeClock
from tests.e2e.test_telegram import ALICE, BOB, identity, running
from tests.fakes.telegram_api import FakeTelegramAPI, SentMessage

GROUP = -1009876543210
FACTS = [f"note {i:02d}: I like fact number {i:02d}" for i in range(1, 13)]


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


async def remember(core: Core, user: int, *facts: str) -> None:
    """Save facts for a Telegram user through the core's own `/remember`."""
    for fact in facts:
        incoming = IncomingMessage(
            platform="telegram",
            platform_user_id=str(user),
            text=f"/remember {fact}",
            chat_id=str(user),
            is_private=True,
        )
        await core.router.handle(incoming)


async def memory_of(core: Core, db: async_sessionmaker[AsyncSession], short_id: int) -> MemoryItem:
    """Alice's memory `m<short_id>`, as stored now."""
    item = await core.memories.get((await identity(db, ALICE)).user_id, short_id)
    assert item is not None
    return item


def button(message: SentMessage, word: str) -> str:
    """The callback data of the one button whose label contains `word`."""
    [data] = [data for row in message.buttons for label, data in row if word in label]
    return data


async def press(fake: FakeTelegramAPI, message: SentMessage, word: str) -> None:
    """Alice presses the button labelled with `word`; wait until the query is answered."""
    query_id = fake.push_callback(
        ALICE, button(message, word), message.message_id, chat_id=message.chat_id
    )
    await fake.wait_for(
        lambda: any(a["callback_query_id"] == query_id for a in fake.callback_answers)
    )


def facts_in(text: str) -> set[str]:
    """Which of the seeded facts a message shows."""
    return {fact for fact in FACTS if fact in text}


async def changed(fake: FakeTelegramAPI, message: SentMessage, edits: int) -> SentMessage:
    """`message` once it has been edited `edits` times."""
    await fake.wait_for(lambda: len(message.edits) >= edits)
    return message


async def test_memory_pages_forward_and_back_in_place(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, core: Core
) -> None:
    await remember(core, ALICE, *FACTS)

    fake.push_message(ALICE, "/memory")
    [message] = await fake.wait_for_sent(ALICE)
    first = facts_in(message.text)
    assert len(first) == 10 and not any("Previous" in label for label, _ in message.buttons[-1])

    await press(fake, message, "Next")
    await changed(fake, message, 1)
    second = facts_in(message.text)
    assert second == set(FACTS) - first
    assert any("Previous" in label for label, _ in message.buttons[-1])
    assert not any("Next" in label for row in message.buttons for label, _ in row)

    await press(fake, message, "Previous")
    await changed(fake, message, 2)
    assert facts_in(message.text) == first
    assert len(fake.sent[ALICE]) == 1


async def test_forget_then_undo_changes_the_database(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    db: async_sessionmaker[AsyncSession],
) -> None:
    await remember(core, ALICE, "my ex is called Tom", "I love hiking")

    fake.push_message(ALICE, "/forget m1")
    [message] = await fake.wait_for_sent(ALICE)
    forgotten = await memory_of(core, db, 1)
    assert (forgotten.live, forgotten.status) == (False, "forgotten")
    assert (await memory_of(core, db, 2)).live

    await press(fake, message, "Undo")
    await changed(fake, message, 1)

    restored = await memory_of(core, db, 1)
    assert restored.live and restored.content == "my ex is called Tom"
    assert message.buttons == []
    assert len(fake.sent[ALICE]) == 1


async def test_pin_then_undo_and_unpin(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    db: async_sessionmaker[AsyncSession],
) -> None:
    await remember(core, ALICE, "my sister is called Maja", "I play the cello")

    fake.push_message(ALICE, "/pin m1")
    [pinned] = await fake.wait_for_sent(ALICE)
    assert (await memory_of(core, db, 1)).pinned
    await press(fake, pinned, "Undo")
    await changed(fake, pinned, 1)
    assert not (await memory_of(core, db, 1)).pinned

    fake.push_message(ALICE, "/pin m2")
    await fake.wait_for_sent(ALICE, 2)
    assert (await memory_of(core, db, 2)).pinned
    fake.push_message(ALICE, "/unpin m2")
    await fake.wait_for_sent(ALICE, 3)
    item = await memory_of(core, db, 2)
    assert item.live and not item.pinned


async def people(db: async_sessionmaker[AsyncSession]) -> int:
    """How many people the database holds."""
    async with db() as session:
        return int(await session.scalar(select(func.count()).select_from(User)) or 0)


async def test_forget_all_erases_only_the_persons_rows_after_confirmation(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    db: async_sessionmaker[AsyncSession],
) -> None:
    await remember(core, ALICE, "I live in Aarhus")
    await remember(core, BOB, "I collect stamps")
    fake.push_message(ALICE, "hello")
    await fake.wait_for_sent(ALICE)
    alice = (await identity(db, ALICE)).user_id
    bob = (await identity(db, BOB)).user_id
    before = await count_person_data(core.sessions, user_id=bob)
    assert (await count_person_data(core.sessions, user_id=alice))["messages"] >= 2

    fake.push_message(ALICE, "/forget all")
    [_, question] = await fake.wait_for_sent(ALICE, 2)
    assert (await count_person_data(core.sessions, user_id=alice))["memories"] == 1
    await press(fake, question, "Yes")
    await changed(fake, question, 1)

    assert all(n == 0 for n in (await count_person_data(core.sessions, user_id=alice)).values())
    assert await count_person_data(core.sessions, user_id=bob) == before
    assert await people(db) == 1
    assert question.buttons == []


async def test_export_is_a_json_document_of_the_persons_data_only(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, core: Core
) -> None:
    await remember(core, ALICE, "I love green tea")
    await remember(core, BOB, "I collect rare stamps")
    fake.push_message(BOB, "my secret word is marmalade")
    await fake.wait_for_sent(BOB)
    fake.push_message(ALICE, "good morning")
    await fake.wait_for_sent(ALICE)

    fake.push_message(ALICE, "/export")
    await fake.wait_for(lambda: any(m.document for m in fake.sent[ALICE]))

    [upload] = [m for m in fake.sent[ALICE] if m.document is not None]
    assert upload.method == "sendDocument" and upload.document is not None
    assert upload.document.filename.endswith(".json")
    raw = upload.document.content.decode()
    data = json.loads(raw)
    assert [m["content"] for m in data["memories"]] == ["I love green tea"]
    assert "good morning" in [m["content"] for m in data["messages"]]
    assert [i["platform_user_id"] for i in data["identities"]] == [str(ALICE)]
    assert "stamps" not in raw and "marmalade" not in raw
    assert fake.sent[BOB][-1].document is None


async def test_expired_buttons_are_answered_with_the_stale_message(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    clock: FakeClock,
    db: async_sessionmaker[AsyncSession],
) -> None:
    await remember(core, ALICE, *FACTS)
    fake.push_message(ALICE, "/memory")
    [page] = await fake.wait_for_sent(ALICE)
    fake.push_message(ALICE, "/forget all")
    [_, question] = await fake.wait_for_sent(ALICE, 2)

    clock.advance(minutes=11)  # past the confirmation's ten minutes
    await press(fake, question, "Yes")
    await changed(fake, question, 1)
    clock.advance(days=7)  # past the page buttons' week
    await press(fake, page, "Next")
    await changed(fake, page, 1)

    assert question.text == STALE_BUTTON and question.buttons == []
    assert page.text == STALE_BUTTON and page.buttons == []
    alice = (await identity(db, ALICE)).user_id
    assert (await count_person_data(core.sessions, user_id=alice))["memories"] == len(FACTS)
    assert len(fake.callback_answers) == 2


async def test_memory_asked_in_a_group_is_answered_and_paged_in_private(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, core: Core
) -> None:
    await remember(core, ALICE, *FACTS)
    fake.start_chat(ALICE)

    fake.push_message(ALICE, "/memory", chat_id=GROUP, chat_type="supergroup")
    [private] = await fake.wait_for_sent(ALICE)
    [notice] = await fake.wait_for_sent(GROUP)

    assert notice.text == SENT_PRIVATELY and notice.buttons == []
    assert len(facts_in(private.text)) == 10
    first = facts_in(private.text)
    await press(fake, private, "Next")
    await changed(fake, private, 1)
    assert facts_in(private.text) == set(FACTS) - first
    assert len(fake.sent[GROUP]) == 1
    assert not any("fact number" in m.text for m in fake.sent[GROUP])
