"""Which remembered items context assembly shows, on real PostgreSQL: dated events in
their windows around today (upcoming within 14 days, recent within 3), core memories by
importance. Only `assemble_context` is driven; its output is read section by section."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.care.repository import SqlMemoryRepository
from memory.recall.context import AssembledContext, assemble_context
from memory.recall.minilm import MiniLMEmbedder
from memory.store.items import Candidate, MemoryItem
from memory.store.tables import User
from tests.conftest import FakeClock

Db = async_sessionmaker[AsyncSession]
COMING_UP = "Going on now and coming up"
ABOUT = "About them"
QUERY = "what should I cook tonight?"  # unrelated to every memory below


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def repo(db: Db, embedder: MiniLMEmbedder, clock: FakeClock) -> SqlMemoryRepository:
    return SqlMemoryRepository(db, embedder, clock)


async def person(db: Db) -> int:
    async with db.begin() as session:
        user = User(display_name="Alice", timezone="UTC")
        session.add(user)
        await session.flush()
        return user.id


async def event(
    repo: SqlMemoryRepository, clock: FakeClock, user_id: int, content: str, days: float
) -> MemoryItem:
    """A dated event as extraction stores it: it expires three days after it happens."""
    when = clock.now() + timedelta(days=days)
    candidate = Candidate(
        content, "event", "active", 6, 0.9, event_at=when, expires_at=when + timedelta(days=3)
    )
    return await repo.add(user_id, candidate, source="extracted", actor="extraction")


async def fact(
    repo: SqlMemoryRepository, user_id: int, content: str, importance: float
) -> MemoryItem:
    candidate = Candidate(content, "fact", "core", importance, 0.9)
    return await repo.add(user_id, candidate, source="extracted", actor="extraction")


async def assemble(
    db: Db, embedder: MiniLMEmbedder, clock: FakeClock, user_id: int
) -> AssembledContext:
    return await assemble_context(
        db,
        embedder,
        user_id=user_id,
        query=QUERY,
        now=clock.now(),
        timezone="UTC",
        budget_tokens=1500,
    )


def sections(text: str) -> dict[str, list[str]]:
    """The rendered block as {section title: its lines}."""
    found: dict[str, list[str]] = {}
    for part in text.split("\n## ")[1:]:
        title, *lines = part.splitlines()
        found[title] = [line.removeprefix("- ") for line in lines if line.startswith("- ")]
    return found


async def test_upcoming_events_are_in_context_within_fourteen_days(
    db: Db, repo: SqlMemoryRepository, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await person(db)
    wedding = await event(repo, clock, alice, "The person's sister gets married in Porto", 13)
    dentist = await event(repo, clock, alice, "The person has a dentist appointment", 15)

    assembled = await assemble(db, embedder, clock, alice)

    (line,) = sections(assembled.text)[COMING_UP]
    assert line.startswith("The person's sister gets married in Porto — ")
    assert line.endswith("(in 13 days)")
    assert wedding.id in assembled.memory_ids and dentist.id not in assembled.memory_ids
    assert "dentist" not in assembled.text

    clock.advance(days=1.5)  # now the dentist is 13.5 days ahead
    later = sections((await assemble(db, embedder, clock, alice)).text)[COMING_UP]
    assert [line.split(" — ")[0] for line in later] == [
        "The person's sister gets married in Porto",
        "The person has a dentist appointment",
    ]


async def test_past_events_stay_in_context_for_three_days(
    db: Db, repo: SqlMemoryRepository, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await person(db)
    race = await event(repo, clock, alice, "The person ran the Copenhagen half marathon", -2)
    interview = await event(repo, clock, alice, "The person had a job interview at Acme", -4)

    assembled = await assemble(db, embedder, clock, alice)

    (line,) = sections(assembled.text)[COMING_UP]
    assert line.startswith("The person ran the Copenhagen half marathon — ")
    assert line.endswith("(2 days ago)")
    assert race.id in assembled.memory_ids and interview.id not in assembled.memory_ids
    assert "Acme" not in assembled.text

    clock.advance(days=1.5)  # the race is 3.5 days ago now
    assert COMING_UP not in sections((await assemble(db, embedder, clock, alice)).text)


async def test_core_memories_come_by_importance(
    db: Db, repo: SqlMemoryRepository, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await person(db)
    for content, importance in (
        ("The person has a cat called Miso", 4),
        ("The person is a nurse at Rigshospitalet", 9),
        ("The person grew up in Aarhus", 6),
        ("The person likes long walks by the sea", 2),
    ):
        await fact(repo, alice, content, importance)

    about = sections((await assemble(db, embedder, clock, alice)).text)[ABOUT]

    assert about == [
        "The person is a nurse at Rigshospitalet",
        "The person grew up in Aarhus",
        "The person has a cat called Miso",
        "The person likes long walks by the sea",
    ]
