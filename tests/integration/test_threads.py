"""Threads on real PostgreSQL: extraction files what a person says about one ongoing
situation under one thread of theirs, counts the sessions it came up in, and the nightly
patrol promotes the situation to core memory once it keeps coming back."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import Core
from bot.domain import IncomingMessage
from memory.care.repository import SqlMemoryRepository
from memory.learning.extraction import extract_session
from memory.recall.minilm import MiniLMEmbedder
from memory.store.items import Candidate, ExtractionOutcome
from memory.store.tables import Memory, Message, Thread, User
from memory.store.tables import Session as SessionRow
from scheduler.patrol import run_nightly
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.extractor import RuleExtractor
from tests.fakes.llm import FakeToolCaller
from tests.integration.test_scheduler_support import scheduler_deps

Db = async_sessionmaker[AsyncSession]
CPH = "Europe/Copenhagen"


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """The real offline embedder: similarity decides which thread a memory joins."""
    return MiniLMEmbedder()


@pytest.fixture
def fast() -> FakeToolCaller:
    """The scripted fast model."""
    return FakeToolCaller()


class Extraction:
    """People, sessions and `extract_session` over real PostgreSQL."""

    def __init__(
        self, db: Db, embedder: MiniLMEmbedder, fast: FakeToolCaller, clock: FakeClock
    ) -> None:
        self.db, self.embedder, self.fast, self.clock = db, embedder, fast, clock
        self.repo = SqlMemoryRepository(db, embedder, clock)

    async def person(self, name: str) -> int:
        async with self.db.begin() as session:
            user = User(display_name=name, timezone=CPH)
            session.add(user)
            await session.flush()
            return user.id

    async def session(self, user_id: int, text: str) -> tuple[int, int]:
        """A closed session in which the person said `text`: (session id, message id)."""
        now = self.clock.now()
        async with self.db.begin() as session:
            row = SessionRow(user_id=user_id, started_at=now, last_message_at=now, closed_at=now)
            session.add(row)
            await session.flush()
            said = Message(
                user_id=user_id,
                session_id=row.id,
                role="user",
                content=text,
                platform="console",
                created_at=now,
            )
            session.add(said)
            await session.flush()
            return row.id, said.id

    async def run(self, user_id: int, session_id: int) -> ExtractionOutcome:
        return await extract_session(
            user_id=user_id,
            session_id=session_id,
            sessions=self.db,
            memories=self.repo,
            llm=self.fast,
            embedder=self.embedder,
            clock=self.clock,
            timezone=CPH,
        )

    async def threads(self, user_id: int) -> list[Thread]:
        async with self.db() as session:
            found = await session.scalars(
                select(Thread).where(Thread.user_id == user_id).order_by(Thread.id)
            )
            return list(found)

    async def thread_of(self, memory_id: int) -> int | None:
        async with self.db() as session:
            return await session.scalar(select(Memory.thread_id).where(Memory.id == memory_id))


@pytest.fixture
def extraction(
    db: Db, embedder: MiniLMEmbedder, fast: FakeToolCaller, clock: FakeClock
) -> Extraction:
    return Extraction(db, embedder, fast, clock)


def candidate(content: str, evidence: int, **fields: Any) -> dict[str, Any]:
    """One `record_memories` candidate: an ongoing situation unless told otherwise."""
    return {
        "content": content,
        "category": "thread",
        "tier": "active",
        "importance": 6,
        "confidence": 0.9,
        "evidence_message_ids": [evidence],
        **fields,
    }


def threads_listed(fast: FakeToolCaller) -> Sequence[str]:
    """The thread titles the latest extraction prompt showed the model."""
    prompt = [r.prompt for r in fast.requests if r.tool_name == "record_memories"][-1]
    block = prompt.split("<threads>\n", 1)[1].split("\n</threads>", 1)[0]
    return [html.unescape(title) for title in re.findall(r"<thread>(.*?)</thread>", block)]


async def test_two_sessions_about_one_situation_share_one_thread(
    extraction: Extraction, fast: FakeToolCaller, clock: FakeClock
) -> None:
    alice = await extraction.person("Alice")
    first, said = await extraction.session(alice, "I have a job interview at Acme on Friday!")
    fast.answer(
        candidate(
            "The person has a job interview at Acme",
            said,
            category="event",
            event_date="2026-03-06",
            thread="Job interview at Acme",
        )
    )
    (event,) = (await extraction.run(alice, first)).items

    clock.advance(days=1)
    second, said = await extraction.session(alice, "prepping my answers for Acme, so nervous")
    fast.answer(
        candidate(
            "The person is preparing answers for the Acme interview",
            said,
            thread="  job interview at ACME. ",
        )
    )
    (prep,) = (await extraction.run(alice, second)).items

    assert threads_listed(fast) == ["Job interview at Acme"]
    (thread,) = await extraction.threads(alice)
    assert event.thread_id == prep.thread_id == thread.id
    assert thread.title == "Job interview at Acme" and thread.status == "open"
    assert thread.session_ids == [first, second]
    assert thread.last_seen_at == clock.now()


async def test_without_a_known_title_a_memory_joins_the_thread_closest_in_meaning(
    extraction: Extraction, fast: FakeToolCaller, clock: FakeClock
) -> None:
    alice = await extraction.person("Alice")
    first, said = await extraction.session(alice, "job interview at Acme on Friday")
    fast.answer(
        candidate(
            "The person has a job interview at Acme on Friday",
            said,
            category="event",
            event_date="2026-03-06",
            thread="Acme interview",
        )
    )
    await extraction.run(alice, first)

    clock.advance(days=1)
    second, said = await extraction.session(alice, "practising for Acme; also started running")
    fast.answer(
        candidate("The person is preparing for the Acme job interview", said, thread=None),
        candidate(
            "The person is training for a marathon", said, category="goal", thread="Marathon"
        ),
    )
    prep, marathon = (await extraction.run(alice, second)).items

    acme, running = await extraction.threads(alice)
    assert prep.thread_id == acme.id and acme.session_ids == [first, second]
    assert marathon.thread_id == running.id and running.title == "Marathon"
    assert running.session_ids == [second]


async def test_saying_the_same_again_counts_the_session_and_files_older_memories(
    extraction: Extraction, fast: FakeToolCaller, clock: FakeClock
) -> None:
    alice = await extraction.person("Alice")
    older = await extraction.repo.add(
        alice,
        Candidate("The person is renovating the kitchen", "thread", "active", 5, 0.9),
        source="extracted",
        actor="extraction",
    )
    assert older.thread_id is None  # stored before threads existed
    sessions = []
    for text in ("the kitchen is a building site", "kitchen renovation, day two"):
        session_id, said = await extraction.session(alice, text)
        fast.answer(
            candidate("The person is renovating the kitchen", said, thread="Kitchen renovation")
        )
        outcome = await extraction.run(alice, session_id)
        assert (outcome.added, outcome.skipped) == (0, 1)
        sessions.append(session_id)
        clock.advance(days=1)

    (thread,) = await extraction.threads(alice)
    assert await extraction.thread_of(older.id) == thread.id
    assert thread.session_ids == sessions


async def test_another_persons_threads_are_never_matched(
    extraction: Extraction, fast: FakeToolCaller
) -> None:
    alice, bob = await extraction.person("Alice"), await extraction.person("Bob")
    said_by = {}
    for user_id, name in ((alice, "alice"), (bob, "bob")):
        session_id, said = await extraction.session(user_id, "interview at Acme on Friday")
        said_by[name] = session_id
        fast.answer(
            candidate(
                "The person has a job interview at Acme",
                said,
                category="event",
                event_date="2026-03-06",
                thread="Job interview at Acme",
            )
        )
        await extraction.run(user_id, session_id)
        if name == "bob":
            assert threads_listed(fast) == []  # alice's title is not shown

    (alices,) = await extraction.threads(alice)
    (bobs,) = await extraction.threads(bob)
    assert alices.id != bobs.id
    assert alices.session_ids == [said_by["alice"]] and bobs.session_ids == [said_by["bob"]]
    async with extraction.db() as session:
        owners = dict(
            (await session.execute(select(Memory.user_id, Thread.user_id).join(Thread))).all()
        )
    assert owners == {alice: alice, bob: bob}


async def test_a_thread_with_a_forgotten_memory_is_not_shown_matched_or_promoted(
    core: Core, clock: FakeClock
) -> None:
    alice = await _person(core)
    async with core.sessions.begin() as db:
        thread = Thread(user_id=alice, title="Divorce from Sam", session_ids=[1, 2, 3])
        db.add(thread)
        await db.flush()
    kept, gone = [
        await core.memories.add(
            alice,
            Candidate(text, "thread", "active", 7, 0.9, thread_id=thread.id),
            source="extracted",
            actor="extraction",
        )
        for text in ("The person is going through a divorce", "The person's ex is called Sam")
    ]
    await core.memories.forget(alice, gone.short_id)
    extraction = Extraction(core.sessions, MiniLMEmbedder(), FakeToolCaller(), clock)
    session_id, said = await extraction.session(alice, "the lawyers again today")
    extraction.fast.answer(candidate("The person met divorce lawyers", said, thread="Divorce"))

    (met,) = (await extraction.run(alice, session_id)).items
    assert all("Divorce from Sam" not in r.prompt for r in extraction.fast.requests)
    assert met.thread_id not in (None, thread.id)

    await _patrol_now(core, alice)
    async with core.sessions() as db:
        assert await db.scalar(select(Thread.status).where(Thread.id == thread.id)) == "withdrawn"
    assert [m.id for m in await core.memories.live(alice, tier="core")] == []
    assert (await core.memories.get(alice, kept.short_id)) == kept  # still active, untouched


def says(text: str) -> IncomingMessage:
    return IncomingMessage("console", "alice", text, chat_id="chat-alice", display_name="Alice")


async def _person(core: Core) -> int:
    person = await core.store.ensure_person(
        platform="console", platform_user_id="alice", chat_id="chat-alice", display_name="Alice"
    )
    return person.id


async def _patrol_now(core: Core, user_id: int) -> None:
    """The person's night has come: run the nightly patrol (no model steps)."""
    async with core.sessions.begin() as db:
        await db.execute(
            sql("UPDATE users SET next_patrol_at = :due WHERE id = :id"),
            {"due": core.clock.now() - timedelta(minutes=1), "id": user_id},
        )
    report = await run_nightly(scheduler_deps(core, llm_steps=False))
    assert report is not None and report.people == 1


async def test_the_patrol_promotes_a_situation_once_it_recurs(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    extractor = RuleExtractor()
    for pattern, content, importance in (
        ("new job", "The person got a new job in Aarhus and is moving there", 7),
        ("flats", "The person is looking at flats in Aarhus", 5),
        ("boxes", "The person packed the first boxes for the move to Aarhus", 4),
    ):
        extractor.add(
            pattern,
            content=content,
            category="thread",
            tier="active",
            importance=importance,
            thread="Moving to Aarhus",
        )
    scripted_llm.tools["record_memories"] = extractor
    said = (
        "I got a new job in Aarhus, we're moving!",
        "spent the evening looking at flats",
        "packed the first boxes today",
    )
    for day, text in enumerate(said, start=1):
        await core.router.handle(says(text))
        clock.advance(hours=2)
        await core.memory.sweep(idle_gap=timedelta(minutes=30))
        await core.background.drain()
        alice = await _person(core)
        await _patrol_now(core, alice)
        async with core.sessions() as db:
            (thread,) = (await db.scalars(select(Thread))).all()
        assert len(set(thread.session_ids)) == day
        promoted = await core.memories.live(alice, tier="core")
        if day < 3:
            assert thread.status == "open" and promoted == []
        clock.advance(hours=22)

    assert thread.status == "promoted"
    (core_memory,) = promoted
    assert core_memory.content == "The person got a new job in Aarhus and is moving there"
    assert (core_memory.category, core_memory.thread_id) == ("thread", thread.id)
    active = await core.memories.live(alice, tier="active")
    assert sorted(m.content for m in active) == [
        "The person is looking at flats in Aarhus",
        "The person packed the first boxes for the move to Aarhus",
    ]
    assert {m.thread_id for m in active} == {thread.id}
