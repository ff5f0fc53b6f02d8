"""The memory repository on real PostgreSQL: versions, trash, pins, undo, scoping."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.care.repository import SqlMemoryRepository
from memory.recall.minilm import MiniLMEmbedder
from memory.store.errors import MemoryNotFound, NothingToUndo, PinLimitReached
from memory.store.items import Candidate, content_hash
from memory.store.tables import Memory, MemoryEvent, User
from tests.conftest import FakeClock


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    """The real offline embedder (loads in well under a second)."""
    return MiniLMEmbedder()


@pytest.fixture
def repo(
    db: async_sessionmaker[AsyncSession], embedder: MiniLMEmbedder, clock: FakeClock
) -> SqlMemoryRepository:
    return SqlMemoryRepository(db, embedder, clock)


async def new_person(db: async_sessionmaker[AsyncSession], name: str = "Alice") -> int:
    async with db.begin() as session:
        user = User(display_name=name)
        session.add(user)
        await session.flush()
        return user.id


def fact(content: str, *, category: str = "fact", importance: float = 6) -> Candidate:
    tier = "core" if category in {"identity", "fact", "relationship", "preference"} else "active"
    return Candidate(content, category, tier, importance, 0.9)


async def events_of(db: async_sessionmaker[AsyncSession], user_id: int) -> list[tuple[str, str]]:
    async with db() as session:
        rows = await session.execute(
            select(MemoryEvent.action, MemoryEvent.actor)
            .where(MemoryEvent.user_id == user_id)
            .order_by(MemoryEvent.id)
        )
        return [(action, actor) for action, actor in rows.all()]


async def test_short_ids_count_per_person_and_each_add_is_recorded(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository
) -> None:
    alice, bob = await new_person(db), await new_person(db, "Bob")
    first = await repo.add(alice, fact("The person is a nurse"), source="user", actor="user")
    second = await repo.add(
        alice, fact("The person has a dog named Rex"), source="extracted", actor="extraction"
    )
    bobs = await repo.add(bob, fact("The person plays chess"), source="user", actor="user")

    assert (first.label, second.label, bobs.label) == ("m1", "m2", "m1")
    assert first.live and first.source == "user" and second.source == "extracted"
    assert await repo.count_live(alice) == 2
    assert await events_of(db, alice) == [("create", "user"), ("create", "extraction")]
    assert await repo.by_hash(alice, content_hash("the person is a NURSE.")) == first
    async with db() as session:
        stored = await session.scalar(select(Memory.embedding).where(Memory.id == first.id))
    assert stored is not None and len(stored) == 384


async def test_supersede_keeps_history_and_only_the_new_version_is_live(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository, clock: FakeClock
) -> None:
    alice = await new_person(db)
    old = await repo.add(alice, fact("The person lives in Copenhagen"), source="user", actor="user")
    clock.advance(days=1)
    new = await repo.supersede(
        alice, old.short_id, fact("The person lives in London"), source="user", actor="user"
    )

    assert [m.content for m in await repo.live(alice)] == ["The person lives in London"]
    history = await repo.history(alice, old.short_id)
    assert [v.id for v in history.versions] == [old.id, new.id]
    ended = history.versions[0]
    assert ended.valid_until == clock.now() and ended.superseded_by == new.id
    assert ended.content == "The person lives in Copenhagen"  # nothing overwritten in place
    assert [e.action for e in history.events] == ["create", "supersede"]
    assert history.events[1].details["old_id"] == old.id
    assert (await repo.history(alice, new.short_id)).versions == history.versions
    with pytest.raises(MemoryNotFound):  # the old version is no longer current
        await repo.supersede(alice, old.short_id, fact("The person lives in Paris"), **_user())


def _user() -> dict[str, Any]:
    return {"source": "user", "actor": "user"}


async def test_forget_hides_at_once_restore_brings_back_and_trash_is_purged_after_30_days(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository, clock: FakeClock
) -> None:
    alice, bob = await new_person(db), await new_person(db, "Bob")
    olives = await repo.add(alice, fact("The person hates olives"), **_user())
    dog = await repo.add(alice, fact("The person has a dog named Rex"), **_user())
    bobs = await repo.add(bob, fact("The person hates olives too"), **_user())

    forgotten = await repo.forget(alice, olives.short_id)
    assert forgotten.status == "forgotten" and not forgotten.live
    assert [m.id for m in await repo.live(alice)] == [dog.id]
    assert await repo.find_by_text(alice, "olives") == []
    (vector,) = await repo.embed(["The person hates olives"])
    assert [m.id for m, _ in await repo.similar(alice, vector)] == [dog.id]
    assert [m.id for m in await repo.trash(alice)] == [olives.id]

    restored = await repo.restore(alice, olives.short_id)
    assert restored.live and [m.id for m in await repo.find_by_text(alice, "OLIVE")] == [olives.id]
    with pytest.raises(MemoryNotFound):
        await repo.restore(alice, olives.short_id)  # not in the trash any more

    await repo.forget(alice, olives.short_id)
    await repo.forget(bob, bobs.short_id)
    clock.advance(days=20)
    await repo.forget(alice, dog.short_id)
    clock.advance(days=11)
    assert [m.id for m in await repo.trash(alice)] == [dog.id]
    assert await repo.purge_trash(clock.now()) == 2  # everyone's, set-based
    assert await repo.get(alice, olives.short_id) is None
    assert await repo.get(bob, bobs.short_id) is None
    assert (await repo.get(alice, dog.short_id)) is not None
    # a purged memory takes its audit trail with it; the dog's remains
    assert [a for a, _ in await events_of(db, alice)] == ["create", "forget"]


async def test_pins_are_capped(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository
) -> None:
    alice = await new_person(db)
    items = [
        await repo.add(alice, fact(f"The person likes sport number {i}"), **_user())
        for i in range(3)
    ]
    await repo.pin(alice, items[0].short_id, limit=2)
    again = await repo.pin(alice, items[0].short_id, limit=2)  # already pinned: no-op
    await repo.pin(alice, items[1].short_id, limit=2)
    with pytest.raises(PinLimitReached) as raised:
        await repo.pin(alice, items[2].short_id, limit=2)
    assert raised.value.limit == 2 and again.pinned

    assert [m.id for m in await repo.live(alice)][:2] == [items[0].id, items[1].id]
    assert not (await repo.unpin(alice, items[0].short_id)).pinned
    assert (await repo.pin(alice, items[2].short_id, limit=2)).pinned
    assert [a for a, _ in await events_of(db, alice)][3:] == ["pin", "pin", "unpin", "pin"]


async def test_undo_reverses_each_kind_of_change_once(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository, clock: FakeClock
) -> None:
    alice = await new_person(db)
    created = await repo.add(alice, fact("The person is training for a marathon"), **_user())
    create_event = (await repo.events(alice))[0]
    undone = await repo.undo(alice, create_event.id)
    assert undone.status == "forgotten" and await repo.count_live(alice) == 0
    with pytest.raises(NothingToUndo):
        await repo.undo(alice, create_event.id)

    await repo.restore(alice, created.short_id)
    await repo.forget(alice, created.short_id)
    forget_event = (await repo.events(alice))[0]
    assert forget_event.action == "forget"
    assert (await repo.undo(alice, forget_event.id)).live

    newer = await repo.supersede(
        alice, created.short_id, fact("The person is training for a half marathon"), **_user()
    )
    supersede_event = (await repo.events(alice))[0]
    revived = await repo.undo(alice, supersede_event.id)
    assert revived.id == created.id and revived.live and revived.superseded_by is None
    assert [m.id for m in await repo.live(alice)] == [created.id]
    ended = await repo.get(alice, newer.short_id)
    assert ended is not None and not ended.live

    await repo.pin(alice, created.short_id, limit=3)
    pin_event = (await repo.events(alice))[0]
    assert not (await repo.undo(alice, pin_event.id)).pinned
    assert (await repo.events(alice))[0].details["undid"] == pin_event.id


async def test_another_persons_ids_behave_like_missing_ones(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository
) -> None:
    alice, mallory = await new_person(db), await new_person(db, "Mallory")
    secret = await repo.add(alice, fact("The person has a secret diary"), **_user())
    event = (await repo.events(alice))[0]
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: repo.forget(mallory, secret.short_id),
        lambda: repo.restore(mallory, secret.short_id),
        lambda: repo.pin(mallory, secret.short_id, limit=5),
        lambda: repo.unpin(mallory, secret.short_id),
        lambda: repo.supersede(
            mallory, secret.short_id, fact("The person has no diary"), **_user()
        ),
        lambda: repo.history(mallory, secret.short_id),
        lambda: repo.undo(mallory, event.id),
    ]
    for call in calls:
        with pytest.raises(MemoryNotFound):
            await call()
    assert await repo.get(mallory, secret.short_id) is None
    assert await repo.live(mallory) == [] and await repo.trash(mallory) == []
    assert await repo.find_by_text(mallory, "diary") == []
    (vector,) = await repo.embed([secret.content])
    assert await repo.similar(mallory, vector) == []
    assert await repo.by_hash(mallory, content_hash(secret.content)) is None
    assert await repo.events(mallory) == []
    assert (await repo.get(alice, secret.short_id)) == secret  # untouched
    async with db() as session:
        assert await session.scalar(select(func.count()).select_from(MemoryEvent)) == 1


async def test_live_pages_by_tier_and_similar_ranks_by_cosine(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository
) -> None:
    alice = await new_person(db)
    core = await repo.add(alice, fact("The person has a dog named Rex", importance=8), **_user())
    active = await repo.add(
        alice, fact("The person is nervous about the exam", category="emotion"), **_user()
    )
    assert [m.id for m in await repo.live(alice, tier="active")] == [active.id]
    assert await repo.count_live(alice, tier="core") == 1
    assert [m.id for m in await repo.live(alice, limit=1, offset=1)] == [active.id]

    (vector,) = await repo.embed(["The person has a dog called Rex"])
    found = await repo.similar(alice, vector, min_similarity=0.5)
    assert [m.id for m, _ in found] == [core.id] and found[0][1] > 0.9
    assert (await repo.similar(alice, vector, limit=2))[1][1] < found[0][1]
    assert await repo.find_by_text(alice, "  ") == []
    assert [m.id for m in await repo.find_by_text(alice, "100%_")] == []


async def test_pin_refuses_what_is_not_current(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository, clock: FakeClock
) -> None:
    alice = await new_person(db)
    item = await repo.add(alice, fact("The person speaks Danish"), **_user())
    await repo.forget(alice, item.short_id)
    with pytest.raises(MemoryNotFound):
        await repo.pin(alice, item.short_id, limit=5)
    clock.advance(hours=1)
    again = await repo.forget(alice, item.short_id)  # forgetting twice changes nothing
    assert again.status == "forgotten" and [a for a, _ in await events_of(db, alice)] == [
        "create",
        "forget",
    ]
    assert (await repo.trash(alice))[0].short_id == item.short_id


async def test_unknown_vocabulary_is_refused_before_anything_is_stored(
    db: async_sessionmaker[AsyncSession], repo: SqlMemoryRepository
) -> None:
    alice = await new_person(db)
    bad = [
        (fact("The person is tall"), "robot", "user"),
        (fact("The person is tall"), "user", "robot"),
        (Candidate("The person is tall", "mood", "core", 5, 1), "user", "user"),
        (fact("   "), "user", "user"),
    ]
    for candidate, source, actor in bad:
        with pytest.raises(ValueError):
            await repo.add(alice, candidate, source=source, actor=actor)
    with pytest.raises(MemoryNotFound):
        await repo.add(alice + 1, fact("The person is tall"), **_user())
    assert await repo.count_live(alice) == 0 and await events_of(db, alice) == []
