"""Hybrid recall on real PostgreSQL: relevance, what must never come back, hostile queries."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.minilm import MiniLMEmbedder
from memory.recall.retrieval import candidates, mark_recalled, recall
from memory.store.conversations import SqlConversationStore
from memory.store.tables import Memory, User
from tests.conftest import FakeClock

Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One loaded MiniLM for the module."""
    return MiniLMEmbedder()


async def person(db: Sessions, name: str) -> int:
    async with db.begin() as s:
        user = User(display_name=name)
        s.add(user)
        await s.flush()
        return user.id


async def remember(
    db: Sessions,
    embedder: MiniLMEmbedder,
    user_id: int,
    content: str,
    now: datetime,
    **columns: object,
) -> int:
    vector = (await embedder.embed([content]))[0]
    async with db.begin() as s:
        count = len((await s.scalars(select(Memory.id).where(Memory.user_id == user_id))).all())
        row = Memory(
            user_id=user_id,
            short_id=count + 1,
            tier=columns.pop("tier", "core"),
            category=columns.pop("category", "fact"),
            content=content,
            content_hash=hashlib.sha256(content.encode()).hexdigest(),
            importance=columns.pop("importance", 5.0),
            confidence=columns.pop("confidence", 0.9),
            source="extracted",
            valid_from=now,
            embedding=[float(x) for x in vector],
            **columns,
        )
        s.add(row)
        await s.flush()
        return row.id


async def say(
    store: SqlConversationStore, user: str, text: str, at: datetime, message_id: str
) -> tuple[int, int]:
    inbound = await store.record_inbound(
        platform="console",
        platform_user_id=user,
        chat_id=f"chat-{user}",
        display_name=user,
        text=text,
        platform_message_id=message_id,
        now=at,
        idle_gap=timedelta(minutes=30),
    )
    return inbound.person.id, inbound.message.id


FACTS = (
    "Has a golden retriever called Biscuit",
    "Works night shifts as a nurse at St Mary's hospital",
    "Is allergic to peanuts",
    "Is learning Japanese for a trip to Kyoto next spring",
    "Their sister Anna lives in Lisbon",
    "Supports Arsenal and watches every match",
)


async def alice_with_memories(db: Sessions, embedder: MiniLMEmbedder, now: datetime) -> int:
    alice = await person(db, "Alice")
    for fact in FACTS:
        await remember(db, embedder, alice, fact, now)
    return alice


async def test_a_memory_is_found_by_meaning(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await alice_with_memories(db, embedder, clock.now())
    expected = {  # no word in common with the memory
        "what's my dog's name?": FACTS[0],
        "any plans for my holiday in Japan?": FACTS[3],
        "what should I eat, anything with nuts?": FACTS[2],
    }
    for query, fact in expected.items():
        found = await recall(db, embedder, user_id=alice, query=query, k=3, now=clock.now())
        assert found[0].content == fact
    assert found[0].kind == "memory" and found[0].short_id == 3 and found[0].tier == "core"


async def test_small_talk_recalls_nothing_unrelated(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await alice_with_memories(db, embedder, clock.now())
    for query in ("hello", "hi again!", "morning"):
        assert await recall(db, embedder, user_id=alice, query=query, now=clock.now()) == []


async def test_a_memory_is_found_by_keyword(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await alice_with_memories(db, embedder, clock.now())
    expected = {
        "Biscuit": FACTS[0],
        "anything new in Lisbon?": FACTS[4],
        "peanuts at the party": FACTS[2],
        "Arsenal": FACTS[5],
    }
    for query, fact in expected.items():
        found = await recall(db, embedder, user_id=alice, query=query, k=1, now=clock.now())
        assert [f.content for f in found] == [fact]


async def test_forgotten_dead_and_superseded_memories_never_come_back(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    now = clock.now()
    alice = await person(db, "Alice")
    live = await remember(db, embedder, alice, "Drives a red bicycle to work", now)
    await remember(db, embedder, alice, "Drives a blue car to work", now, status="forgotten")
    await remember(db, embedder, alice, "Drives a green van to work", now, status="dead")
    await remember(db, embedder, alice, "Drives a yellow scooter to work", now, valid_until=now)
    dying = await remember(db, embedder, alice, "Drives a tram to work", now, status="dying")
    for query in ("Drives to work", "blue car", "green van", "yellow scooter", "car"):
        found = await recall(db, embedder, user_id=alice, query=query, k=10, now=now)
        assert {f.id for f in found} <= {live, dying}


async def test_another_persons_rows_never_come_back_even_when_quoted(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    now = clock.now()
    store = SqlConversationStore(db, embedder)
    alice, _ = await say(store, "alice", "My bank PIN is 4921, keep it secret", now, "a1")
    await remember(db, embedder, alice, "Bank PIN is 4921", now)
    bob, bob_message = await say(store, "bob", "I had pasta for lunch", now, "b1")
    for query in ("My bank PIN is 4921, keep it secret", "Bank PIN is 4921", "PIN"):
        found = await recall(db, embedder, user_id=bob, query=query, k=10, now=now)
        assert [(f.kind, f.id) for f in found] in ([], [("message", bob_message)])
        assert all("4921" not in f.content for f in found)


async def test_a_message_said_long_ago_is_found(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    store = SqlConversationStore(db, embedder)
    long_ago = clock.now() - timedelta(days=400)
    _, old = await say(store, "alice", "I finally ran the Berlin marathon today!", long_ago, "1")
    for i in range(40):
        at = clock.now() - timedelta(days=40 - i)
        text = f"Work was busy today, meeting number {i} about the quarterly budget"
        alice, _ = await say(store, "alice", text, at, str(i + 2))
    found = await recall(
        db, embedder, user_id=alice, query="how did my marathon go?", k=5, now=clock.now()
    )
    assert found[0].id == old
    assert found[0].kind == "message" and found[0].role == "user"
    assert found[0].platform_message_id == "1"


async def test_the_current_sessions_messages_are_left_out(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    store = SqlConversationStore(db, embedder)
    alice, first = await say(store, "alice", "My cat Pepper is sick", clock.now(), "1")
    clock.advance(days=2)
    inbound = await store.record_inbound(
        platform="console",
        platform_user_id="alice",
        chat_id="chat-alice",
        display_name="alice",
        text="Pepper saw the vet today",
        platform_message_id="2",
        now=clock.now(),
        idle_gap=timedelta(minutes=30),
    )
    found = await recall(
        db,
        embedder,
        user_id=alice,
        query="Pepper",
        now=clock.now(),
        exclude_session_id=inbound.session.id,
    )
    assert [f.id for f in found] == [first]
    everything = await recall(db, embedder, user_id=alice, query="Pepper", now=clock.now())
    assert {f.id for f in everything} == {first, inbound.message.id}


async def test_memories_outrank_messages_and_kinds_can_be_switched_off(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    store = SqlConversationStore(db, embedder)
    alice, said = await say(store, "alice", "I'm allergic to peanuts", clock.now(), "1")
    kept = await remember(db, embedder, alice, "Is allergic to peanuts", clock.now())
    found = await recall(db, embedder, user_id=alice, query="peanut allergy", now=clock.now())
    assert [(f.kind, f.id) for f in found] == [("memory", kept), ("message", said)]
    only_messages = await recall(
        db, embedder, user_id=alice, query="peanuts", now=clock.now(), include_memories=False
    )
    assert [f.kind for f in only_messages] == ["message"]
    only_memories = await recall(
        db, embedder, user_id=alice, query="peanuts", now=clock.now(), include_messages=False
    )
    assert [f.kind for f in only_memories] == ["memory"]


@pytest.mark.parametrize(
    "query",
    [
        "'); DROP TABLE users; --",
        "&|!():*",
        "",
        "   ",
        "x" * 5000,
        "a & b | !c <-> d:*",
        "\x00 nul",
        '"unterminated',
        "\\ backslash ' quote",
        "😀 emoji ümlaut 日本語",
    ],
)
async def test_hostile_queries_do_not_error(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock, query: str
) -> None:
    store = SqlConversationStore(db, embedder)
    alice, _ = await say(
        store, "alice", "DROP TABLE users is a funny thing to say", clock.now(), "1"
    )
    await remember(db, embedder, alice, "Likes SQL jokes & puzzles!", clock.now())
    found = await recall(db, embedder, user_id=alice, query=query, now=clock.now())
    assert len(found) <= 10
    async with db() as s:
        assert await s.scalar(select(User.id).where(User.id == alice)) == alice


async def test_mark_recalled_counts_only_this_persons_memories(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    now = clock.now()
    alice = await person(db, "Alice")
    bob = await person(db, "Bob")
    mine = await remember(db, embedder, alice, "Likes tea", now)
    theirs = await remember(db, embedder, bob, "Likes coffee", now)
    later = now + timedelta(hours=1)
    assert await mark_recalled(db, user_id=alice, memory_ids=[mine, theirs], now=later) == 1
    assert await mark_recalled(db, user_id=alice, memory_ids=[], now=later) == 0
    async with db() as s:
        rows = {m.id: m for m in (await s.scalars(select(Memory))).all()}
    assert (rows[mine].recall_count, rows[mine].last_recalled_at) == (1, later)
    assert (rows[theirs].recall_count, rows[theirs].last_recalled_at) == (0, None)


async def test_terms_with_quotes_and_backslashes_still_match_as_keywords(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    store = SqlConversationStore(db, embedder)
    text = "Saved it under C:\\Users\\o'brien\\notes at O'Brien's pub"
    alice, said = await say(store, "alice", text, clock.now(), "1")
    vector = [float(x) for x in (await embedder.embed(["x"]))[0]]
    for query in (text, "o'brien", "C:\\Users\\o'brien\\notes"):
        found = await candidates(
            db, user_id=alice, query=query, query_vector=vector, memories=False
        )
        assert [(c.id, c.text_rank) for c in found] == [(said, 1)]


async def test_feedback_terms_reach_a_turn_that_shares_no_word_with_the_query(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    store = SqlConversationStore(db, embedder)
    now = clock.now()
    alice, kitten = await say(store, "alice", "We adopted a kitten and named her Miso", now, "1")
    for i in range(4):  # far enough apart that neighbour sharing does not reach
        await say(store, "alice", f"Work meeting {i} about the quarterly budget", now, f"w{i}")
    _, laser = await say(store, "alice", "Miso chases the laser pointer for hours", now, "2")
    vector = [float(x) for x in (await embedder.embed(["kitten"]))[0]]

    async def text_ranks(feedback: list[int]) -> dict[int, int | None]:
        found = await candidates(
            db,
            user_id=alice,
            query="kitten",
            query_vector=vector,
            memories=False,
            feedback_message_ids=feedback,
        )
        return {c.id: c.text_rank for c in found}

    assert (await text_ranks([])).get(laser) is None
    expanded = await text_ranks([kitten])
    assert expanded[kitten] == 1 and expanded[laser] is not None


async def test_feedback_from_another_persons_messages_changes_nothing(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    store = SqlConversationStore(db, embedder)
    now = clock.now()
    alice, _ = await say(store, "alice", "We adopted a kitten and named her Miso", now, "1")
    await say(store, "alice", "Miso chases the laser pointer for hours", now, "2")
    _, bobs = await say(store, "bob", "Miso soup and a laser show tonight", now, "b1")
    vector = [float(x) for x in (await embedder.embed(["kitten"]))[0]]
    found = [
        await candidates(
            db,
            user_id=alice,
            query="kitten",
            query_vector=vector,
            memories=False,
            feedback_message_ids=feedback,
        )
        for feedback in ([], [bobs])
    ]
    assert found[1] == found[0]


async def test_a_history_of_one_message_or_none_still_recalls(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    now = clock.now()
    nobody = await person(db, "Nobody")
    assert await recall(db, embedder, user_id=nobody, query="my dog", now=now) == []
    store = SqlConversationStore(db, embedder)
    alice, said = await say(store, "alice", "My dog Rex loves the beach", now, "1")
    for query in ("Rex", "my puppy at the seaside", "dog"):
        found = await recall(db, embedder, user_id=alice, query=query, now=now)
        assert [f.id for f in found] == [said]
