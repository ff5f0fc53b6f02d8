"""Fewer statements for a turn's memory block, on real PostgreSQL, finding exactly what the
longer way finds: the standing reads (pinned, core, what is going on, notes to self, the
diary's week, the last conversation) in one statement instead of two; and the feedback
pass taking the first pass's summary-unit ranks instead of ranking the summaries'
sentences by vector again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall import retrieval
from memory.recall.context import (
    ALONG,
    RELEVANT,
    Remembered,
    Standing,
    extras_statement,
    remembered,
    standing_params,
    standing_statement,
)
from memory.recall.minilm import MiniLMEmbedder
from memory.recall.retrieval import DEFAULT_TUNING, Candidate, candidates, feedback_ids, fuse
from memory.recall.when import time_window
from memory.recall.within import assemble_within
from memory.store.conversations import SqlConversationStore
from memory.store.diary import week_lines, week_params
from memory.store.tables import DiaryEntry, Thread
from tests.conftest import FakeClock
from tests.integration.test_recall_halves import DAYS
from tests.integration.test_recall_hops import session_of
from tests.integration.test_retrieval import person, remember, say

Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One loaded MiniLM for the module."""
    return MiniLMEmbedder()


@contextmanager
def counted(db: Sessions) -> Iterator[list[str]]:
    """The statements run through `db`'s engine meanwhile."""
    seen: list[str] = []
    engine = db.kw["bind"].sync_engine

    def note(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        seen.append(sql)

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


async def two_statements(
    db: Sessions,
    *,
    user_id: int,
    now: datetime,
    today: date,
    session_id: int | None,
    with_last_summary: bool,
) -> Remembered:
    """What `remembered` read before: the standing rows, then the extras."""
    extras = week_params(user_id, today) | {"sid": session_id or 0}
    async with db() as s:
        rows = await s.execute(standing_statement(), standing_params(user_id, now))
        standing = [Standing(*row) for row in rows]
        notes, last, week = (await s.execute(extras_statement(with_last_summary), extras)).one()
    return Remembered(standing, tuple(notes or ()), last or "", week_lines(week))


async def someone_remembered(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock, name: str
) -> tuple[int, int]:
    """A person with every kind of standing item, and sessions: one closed (by the next
    message, days later) and summarised, one open; returns the person and the open one."""
    store = SqlConversationStore(db, embedder)
    now = clock.now()
    user, first = await say(
        store,
        name,
        f"{name}: the sailing club meets on Fridays",
        now - timedelta(days=3),
        f"{name}-1",
    )
    await store.save_summary(
        user_id=user,
        session_id=await session_of(db, first),
        summary=f"{name} talked about the sailing club.",
        through_id=first,
    )
    _, latest = await say(store, name, "Back from the harbour", now, f"{name}-2")
    for i, (content, columns) in enumerate(
        [
            (f"{name} sails a boat called the Zephyr", {"pinned": True, "importance": 9.0}),
            (f"{name} is allergic to peanuts", {"importance": 8.0}),
            (f"{name} works as a nurse", {"importance": 8.0}),
            (f"{name} has a cat called Pepper", {"importance": 3.0}),
            (
                f"{name} has a regatta on Saturday",
                {"tier": "active", "event_at": now + timedelta(days=5)},
            ),
            (
                f"{name} had a dentist appointment",
                {"tier": "active", "event_at": now - timedelta(days=2)},
            ),
            (
                f"{name} moves flat next month",
                {"tier": "active", "event_at": now + timedelta(days=30)},
            ),
            (f"{name} is repainting the hull", {"tier": "active"}),
            (f"{name} might quit the club", {"unsure": True, "importance": 7.0}),
            (f"{name} once lived in Oslo", {"status": "forgotten"}),
        ]
    ):
        await remember(db, embedder, user, content, now - timedelta(hours=i), **columns)
    today = now.date()
    async with db.begin() as s:
        for days in (1, 2, 9):
            s.add(
                DiaryEntry(
                    user_id=user,
                    local_date=today - timedelta(days=days),
                    lines=[f"{name}'s day {days}: we talked about the Zephyr."],
                    notes_to_self=[f"Ask {name} about the regatta ({days})."],
                    created_at=now - timedelta(days=days - 1),
                )
            )
    return user, await session_of(db, latest)


async def test_the_standing_reads_are_one_statement_and_read_what_two_read(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice, alice_open = await someone_remembered(db, embedder, clock, "Alice")
    bob, _ = await someone_remembered(db, embedder, clock, "Bob")
    nobody = await person(db, "Nobody")
    now = clock.now()
    for user_id, session_id in (
        (alice, alice_open),
        (alice, None),
        (bob, alice_open),
        (nobody, None),
    ):
        for with_last_summary in (True, False):
            for at in (now, now + timedelta(days=6)):
                args: dict[str, Any] = {
                    "user_id": user_id,
                    "now": at,
                    "today": at.date(),
                    "session_id": session_id,
                    "with_last_summary": with_last_summary,
                }
                with counted(db) as statements:
                    got = await remembered(db, **args)
                assert len(statements) == 1
                assert got == await two_statements(db, **args)
    seen = await remembered(
        db, user_id=alice, now=now, today=now.date(), session_id=alice_open, with_last_summary=True
    )
    # The seeding reached every part, and only Alice's own rows are hers.
    assert [s.pinned for s in seen.standing].count(True) == 1
    assert {s.tier for s in seen.standing} == {"core", "active"}
    assert all(s.content.startswith("Alice") for s in seen.standing)
    assert seen.notes_to_self == ("Ask Alice about the regatta (1).",)
    assert seen.last_summary == "Alice talked about the sailing club."
    assert [line for _, line in seen.diary] == [
        "Alice's day 2: we talked about the Zephyr.",
        "Alice's day 1: we talked about the Zephyr.",
    ]
    empty = await remembered(
        db, user_id=nobody, now=now, today=now.date(), session_id=None, with_last_summary=True
    )
    assert empty == Remembered([], (), "", ())


SUMMARIES = {
    0: "Alice talked about Anna's wedding in Lisbon. She needs a dress.",
    1: "Work was hectic before Friday's presentation. Alice practised twice.",
    2: "Alice adopted a kitten called Pepper. Pepper sleeps on the keyboard.",
    3: "Anna phoned about the seating plan for the wedding. It went fine.",
    4: "Alice cooked her mother's lentil soup and felt at home.",
}
QUERIES = [
    "how did my presentation go?",
    "what did Anna say about the wedding?",
    "what did I cook three days ago?",
    "tell me about the kitten Pepper",
    "anything about Lisbon or dresses?",
]


async def ready(vector: list[float]) -> list[float]:
    return vector


def by_row(found: list[Candidate]) -> dict[tuple[str, int], Candidate]:
    return {(c.kind, c.id): c for c in found}


async def test_the_feedback_pass_takes_the_first_pass_unit_ranks(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    store = SqlConversationStore(db, embedder)
    start = clock.now() - timedelta(days=len(DAYS))
    alice = 0
    sessions: list[int] = []
    for day, lines in enumerate(DAYS):
        ids = []
        for i, line in enumerate(lines):
            alice, message_id = await say(
                store, "alice", line, start + timedelta(days=day, minutes=i), f"{day}-{i}"
            )
            ids.append(message_id)
        sessions.append(await session_of(db, ids[0]))
        if day in SUMMARIES:
            await store.save_summary(
                user_id=alice, session_id=sessions[-1], summary=SUMMARIES[day], through_id=ids[-1]
            )
    _, bobs = await say(store, "bob", "Anna and Pepper went to Lisbon", clock.now(), "b-1")
    await remember(db, embedder, alice, "Their sister Anna lives in Lisbon", clock.now())
    now = clock.now()
    unit_kept = 0
    for query in QUERIES:
        window = time_window(query, now)
        vector = [float(x) for x in (await embedder.embed([query]))[0]]
        for exclude in (None, sessions[-1], sessions[0]):
            for tuning in (DEFAULT_TUNING, replace(DEFAULT_TUNING, unit_sessions=1, candidates=2)):
                _, found, units = await retrieval.first_pass(
                    db,
                    ready(vector),
                    user_id=alice,
                    query=query,
                    messages=True,
                    memories=True,
                    dim=embedder.dim,
                    exclude_session_id=exclude,
                    per_list=tuning.candidates,
                    tuning=tuning,
                    window=window,
                )
                assert any(rank is not None for rank in units.values())
                ranked = fuse(found, k=tuning.feedback_docs, tuning=tuning, now=now)
                first = {c.id: c for c in found if c.kind == "message"}
                keep = [
                    i for i, c in first.items() if min(retrieval._ranks(c)) <= tuning.candidates
                ]
                top = tuning.unit_sessions
                unit_kept += sum(
                    1 for i, r in units.items() if r is not None and r <= top and i not in keep
                )
                common: dict[str, Any] = {
                    "user_id": alice,
                    "query": query,
                    "query_vector": vector,
                    "memories": False,
                    "exclude_session_id": exclude,
                    "per_list": tuning.candidates,
                    "tuning": tuning,
                    "feedback_message_ids": feedback_ids(
                        found, ranked, mode="hybrid", tuning=tuning
                    ),
                    "words_only_keeping": keep,
                    "window": window,
                    "names": ["Anna", "Pepper"],
                    "first_ranks": first,
                }
                ranked_again = await candidates(db, **common)
                with counted(db) as statements:
                    carried = await candidates(db, **common, unit_ranks=units)
                assert by_row(carried) == by_row(ranked_again)
                assert len(statements) == 1
                assert all(c.id != bobs for c in carried)
    assert unit_kept > 0  # some rows were kept by their session's unit rank alone


async def test_the_thread_read_runs_only_when_a_recalled_memory_has_a_thread(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    now = clock.now()
    alice = await person(db, "alice")
    async with db.begin() as s:
        thread = Thread(user_id=alice, title="Moving to Aarhus")
        s.add(thread)
        await s.flush()
        thread_id = thread.id
    # Events of weeks ago: not in the standing part, so only recall can bring them.
    for content, filed_under, days in (
        ("Alice adopted a grey kitten called Pepper", None, 40),
        ("Alice signed the lease on a flat in Aarhus", thread_id, 30),
        ("Alice bought a cargo bike for Aarhus", thread_id, 20),
    ):
        await remember(
            db, embedder, alice, content, now, tier="active", event_at=now - timedelta(days=days),
            thread_id=filed_under,
        )  # fmt: skip

    async def block(query: str) -> tuple[str, list[str]]:
        with counted(db) as statements:
            done = await assemble_within(
                db, embedder, user_id=alice, query=query, now=now, timezone="UTC",
                budget_tokens=1500, deadline=60.0,
            )  # fmt: skip
        assert done.degraded is None
        return done.context.text, [sql for sql in statements if "JOIN threads" in sql]

    text, thread_reads = await block("Do you remember my kitten Pepper?")
    assert "grey kitten called Pepper" in text.split(f"## {RELEVANT}")[1]
    assert f"## {ALONG}" not in text and thread_reads == []
    text, thread_reads = await block("Do you remember the lease on the Aarhus flat?")
    assert "signed the lease" in text.split(f"## {RELEVANT}")[1]
    assert "cargo bike" in text
    assert len(thread_reads) == 1
