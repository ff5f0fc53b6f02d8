"""Storing a known person's message in one statement, and every case it hands back to
the transactional path, on real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.conversations import SqlConversationStore
from memory.store.inbound import NewMessage, store_known
from memory.store.records import Inbound
from memory.store.tables import Identity, Message
from memory.store.tables import Session as SessionRow
from tests.conftest import FakeClock

Sessions = async_sessionmaker[AsyncSession]
GAP = timedelta(minutes=30)


def new(clock: FakeClock, text: str, *, message_id: str | None = None, chat: str = "c1",
        private: bool = True) -> NewMessage:  # fmt: skip
    return NewMessage(
        platform="telegram",
        platform_user_id="42",
        chat_id=chat,
        private_chat=private,
        text=text,
        platform_message_id=message_id,
        now=clock.now(),
        embedding=None,
    )


async def record(store: SqlConversationStore, message: NewMessage) -> Inbound:
    return await store.record_inbound(
        platform=message.platform,
        platform_user_id=message.platform_user_id,
        chat_id=message.chat_id,
        display_name="Ada",
        text=message.text,
        platform_message_id=message.platform_message_id,
        now=message.now,
        idle_gap=GAP,
        private_chat=message.private_chat,
    )


async def counts(db: Sessions) -> tuple[int, int]:
    async with db() as s:
        messages = await s.scalar(select(func.count()).select_from(Message))
        sessions = await s.scalar(select(func.count()).select_from(SessionRow))
    return int(messages or 0), int(sessions or 0)


async def test_a_known_person_in_an_open_session_is_stored_in_one_statement(
    db: Sessions, clock: FakeClock
) -> None:
    store = SqlConversationStore(db)
    first = await record(store, new(clock, "hello", message_id="1"))
    clock.advance(minutes=5)
    fast = await store_known(db, new(clock, "how are you?", message_id="2"), idle_gap=GAP)
    assert fast is not None and not fast.duplicate
    assert fast.person == first.person
    assert fast.session.id == first.session.id and fast.session.last_message_at == clock.now()
    assert (fast.message.content, fast.message.role) == ("how are you?", "user")
    async with db() as s:
        stored = (await s.execute(select(Message.content, Message.platform_message_id))).all()
    assert sorted(stored) == [("hello", "1"), ("how are you?", "2")]


async def test_everything_else_is_handed_back_having_written_nothing(
    db: Sessions, clock: FakeClock
) -> None:
    store = SqlConversationStore(db)
    assert await store_known(db, new(clock, "hi"), idle_gap=GAP) is None  # a new person
    assert await counts(db) == (0, 0)
    await record(store, new(clock, "hello", message_id="1"))
    assert await store_known(db, new(clock, "again", message_id="1"), idle_gap=GAP) is None
    clock.advance(hours=2)
    assert await store_known(db, new(clock, "later"), idle_gap=GAP) is None  # idle session
    assert await counts(db) == (1, 1)

    again = await record(store, new(clock, "hello", message_id="1"))
    assert again.duplicate and again.message.content == "hello"
    later = await record(store, new(clock, "later", message_id="3"))
    assert later.closed_session_id == again.session.id and later.session.id != again.session.id
    assert await counts(db) == (2, 2)


async def test_the_private_chat_follows_the_person_but_not_into_groups(
    db: Sessions, clock: FakeClock
) -> None:
    store = SqlConversationStore(db)
    await record(store, new(clock, "hello", chat="c1"))
    assert await store_known(db, new(clock, "in a group", chat="g1", private=False), idle_gap=GAP)
    assert await store_known(db, new(clock, "from a new chat", chat="c2"), idle_gap=GAP)
    async with db() as s:
        assert await s.scalar(select(Identity.chat_id)) == "c2"
        chats = (await s.scalars(select(Message.chat_id).order_by(Message.id))).all()
    assert chats == ["c1", "g1", "c2"]


async def test_many_messages_at_once_are_all_stored_in_one_session_once_each(
    db: Sessions, clock: FakeClock
) -> None:
    store = SqlConversationStore(db)
    await record(store, new(clock, "hello", message_id="0"))
    burst = [new(clock, f"message {i}", message_id=str(i)) for i in range(1, 21)]
    redelivered = [new(clock, "message 1", message_id="1") for _ in range(3)]
    results = await asyncio.gather(*(record(store, m) for m in burst + redelivered))
    assert len({r.session.id for r in results}) == 1
    assert sum(1 for r in results if r.duplicate) == 3
    assert await counts(db) == (21, 1)
