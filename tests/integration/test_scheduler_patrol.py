"""The nightly patrol on real PostgreSQL: each step with its before and after, the
schedule at 03:00 local, the advisory lock, and the run without a model key."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, text, update
from structlog.testing import capture_logs

from bot.bootstrap import Core
from memory.care.patrol_steps import weight
from memory.store.items import Candidate
from memory.store.tables import ButtonAction, Memory, MemoryEvent, Message, Thread, User
from memory.store.tables import Session as SessionRow
from scheduler.deps import SchedulerDeps
from scheduler.patrol import NIGHTLY_LOCK, advisory_lock, run_nightly
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.integration.test_scheduler_support import add_person, scheduler_deps

NOW = datetime(2026, 3, 2, 2, 30, tzinfo=UTC)  # 03:30 in Copenhagen
LAST_PATROL = NOW - timedelta(days=1)


@pytest.fixture
async def alice(core: Core, clock: FakeClock) -> int:
    """A person in Copenhagen whose night has come, last patrolled a day ago."""
    clock.current = NOW
    user_id = await add_person(core, tz="Europe/Copenhagen")
    await set_patrol(core, user_id, due=NOW - timedelta(minutes=30), last=LAST_PATROL)
    return user_id


async def set_patrol(core: Core, user_id: int, *, due: datetime, last: datetime | None) -> None:
    async with core.sessions.begin() as db:
        await db.execute(
            text("UPDATE users SET next_patrol_at = :due, last_patrol_at = :last WHERE id = :id"),
            {"due": due, "last": last, "id": user_id},
        )


async def memory(
    core: Core,
    user_id: int,
    content: str,
    *,
    category: str = "fact",
    tier: str = "core",
    importance: float = 6,
    confidence: float = 0.9,
    source: str = "extracted",
    **columns: Any,
) -> int:
    """A stored memory, then `columns` set as they would be after a while."""
    candidate = Candidate(content, category, tier, importance, confidence)
    item = await core.memories.add(user_id, candidate, source=source, actor="extraction")
    if columns:
        async with core.sessions.begin() as db:
            await db.execute(update(Memory).where(Memory.id == item.id).values(**columns))
    return item.id


async def row(core: Core, memory_id: int) -> Memory:
    async with core.sessions() as db:
        return await db.get_one(Memory, memory_id)


async def sessions_since_recall(core: Core, memory_id: int) -> int:
    """The person's sessions counted since the memory was made or last recalled."""
    async with core.sessions() as db:
        found = await db.execute(
            select(User.session_seq - Memory.recall_seq)
            .select_from(Memory)
            .join(User, User.id == Memory.user_id)
            .where(Memory.id == memory_id)
        )
        return int(found.scalar_one())


async def version(core: Core, memory_id: int) -> str:
    """The row version's transaction id: it changes whenever the row is rewritten."""
    async with core.sessions() as db:
        found = await db.execute(
            text("SELECT xmin::text FROM memories WHERE id = :id"), {"id": memory_id}
        )
        return str(found.scalar_one())


async def actions(core: Core, memory_id: int) -> list[str]:
    async with core.sessions() as db:
        found = await db.scalars(
            select(MemoryEvent.action)
            .where(MemoryEvent.memory_id == memory_id, MemoryEvent.actor == "patrol")
            .order_by(MemoryEvent.id)
        )
        return list(found)


async def sessions_since(core: Core, user_id: int, *starts: datetime) -> None:
    """Conversations the person had (closed ones)."""
    async with core.sessions.begin() as db:
        for start in starts:
            db.add(
                SessionRow(
                    user_id=user_id,
                    started_at=start,
                    last_message_at=start + timedelta(minutes=5),
                    closed_at=start + timedelta(minutes=5),
                )
            )


def deps_for(core: Core, **overrides: Any) -> SchedulerDeps:
    return scheduler_deps(core, **overrides)


async def test_expired_items_leave_prompts_but_stay_searchable_then_are_archived(
    core: Core, alice: int
) -> None:
    expired = await memory(
        core,
        alice,
        "Preparing for the marathon in April",
        category="goal",
        tier="active",
        expires_at=NOW - timedelta(hours=1),
    )
    long_gone = await memory(
        core,
        alice,
        "Worried about the flat viewing",
        category="thread",
        tier="active",
        expires_at=NOW - timedelta(days=31),
        status="dying",
    )
    current = await memory(
        core,
        alice,
        "Learning to play the cello",
        category="goal",
        tier="active",
        expires_at=NOW + timedelta(days=10),
    )
    assert (await row(core, expired)).status == "active"

    await run_nightly(deps_for(core))

    assert (await row(core, expired)).status == "dying"
    assert await actions(core, expired) == ["expire"]
    assert [m.content for m in await core.memories.find_by_text(alice, "marathon")] == [
        "Preparing for the marathon in April"
    ]
    assert (await row(core, long_gone)).status == "dead"
    assert await actions(core, long_gone) == ["archive"]
    assert (await row(core, current)).status == "active"


async def test_decay_fades_and_retires_faded_items_with_pinned_and_explicit_exempt(
    core: Core, alice: int
) -> None:
    await sessions_since(core, alice, NOW - timedelta(hours=20), NOW - timedelta(hours=6))
    await sessions_since(core, alice, LAST_PATROL - timedelta(hours=2))  # counted last night
    fading = await memory(core, alice, "Likes the band Low quite a bit", importance=2.1)
    retiring = await memory(
        core,
        alice,
        "Was tired after the trip",
        category="emotion",
        tier="active",
        importance=1.05,
        expires_at=NOW + timedelta(days=2),
    )
    core_low = await memory(core, alice, "Has a cousin in Aarhus", importance=1.05)
    pinned = await memory(core, alice, "Their dog is called Biscuit", importance=1.0, pinned=True)
    explicit = await memory(core, alice, "Allergic to peanuts", importance=1.0, source="user")
    recalled = await memory(
        core, alice, "Works as a nurse", importance=1.0, last_recalled_at=NOW - timedelta(hours=2)
    )
    steady = await memory(core, alice, "Lives in Copenhagen", importance=8, recall_seq=-5)
    assert weight(2.1, 2) < 2 < weight(2.1, 0)
    untouched = await version(core, steady)

    await run_nightly(deps_for(core))

    assert [await sessions_since_recall(core, m) for m in (fading, steady)] == [2, 7]
    assert await version(core, steady) == untouched  # counted, not rewritten
    assert (await row(core, fading)).status == "dying"
    assert await actions(core, fading) == ["fade"]
    assert (await row(core, retiring)).status == "dead"
    assert await actions(core, retiring) == ["retire"]
    assert (await row(core, core_low)).status == "dying"  # core memories never retire
    for exempt in (pinned, explicit, recalled):
        found = await row(core, exempt)
        assert found.status == "active"
    assert await sessions_since_recall(core, recalled) == 0  # its count starts again
    assert (await row(core, steady)).status == "active"


async def test_recalled_items_are_revived_for_recall_only(core: Core, alice: int) -> None:
    """Retrieval alone is one activation: the decay clock restarts, the status stays."""
    revived = await memory(
        core,
        alice,
        "Plays chess on Sundays",
        status="dying",
        last_recalled_at=NOW - timedelta(hours=3),
    )
    still_dying = await memory(
        core,
        alice,
        "Once visited Porto",
        status="dying",
        recall_seq=-40,
        last_recalled_at=LAST_PATROL - timedelta(days=3),
    )
    await run_nightly(deps_for(core))
    assert (await row(core, revived)).status == "dying"  # only affirmation makes it active
    assert await sessions_since_recall(core, revived) == 0
    assert await actions(core, revived) == ["revive"]
    assert (await row(core, still_dying)).status == "dying"
    assert await sessions_since_recall(core, still_dying) == 40


async def copy_embedding(core: Core, source: int, target: int) -> None:
    """Make `target` a near-duplicate of `source` as far as the vectors go."""
    async with core.sessions.begin() as db:
        await db.execute(
            text(
                "UPDATE memories SET embedding = (SELECT embedding FROM memories WHERE id = :s)"
                " WHERE id = :t"
            ),
            {"s": source, "t": target},
        )


async def test_near_duplicates_merge_into_the_more_confident_without_a_model(
    core: Core, alice: int
) -> None:
    older = await memory(
        core,
        alice,
        "Has a sister called Maja",
        category="relationship",
        confidence=0.95,
        created_at=NOW - timedelta(days=20),
    )
    newer = await memory(
        core, alice, "Their sister's name is Maja", category="relationship", confidence=0.8
    )
    other = await memory(core, alice, "Has a brother called Ole", category="relationship")
    await copy_embedding(core, older, newer)
    await run_nightly(deps_for(core, llm_steps=False))

    kept, merged = await row(core, older), await row(core, newer)
    assert kept.valid_until is None and kept.content == "Has a sister called Maja"
    assert (merged.valid_until, merged.superseded_by) == (NOW, older)
    assert await actions(core, newer) == ["merge"]
    assert (await row(core, other)).valid_until is None
    history = await core.memories.history(alice, kept.short_id)
    assert [v.id for v in history.versions] == [newer, older]


async def test_with_a_model_the_merged_text_is_written_by_the_fast_model(
    core: Core, alice: int, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.tools["merge_memories"] = lambda request: {
        "content": "Has a younger sister called Maja who lives in Oslo"
    }
    first = await memory(
        core,
        alice,
        "Has a younger sister called Maja",
        category="relationship",
        created_at=NOW - timedelta(days=20),
    )
    second = await memory(core, alice, "Their sister Maja lives in Oslo", category="relationship")
    await copy_embedding(core, first, second)
    await run_nightly(deps_for(core))

    live = await core.memories.live(alice, tier="core")
    assert [m.content for m in live] == ["Has a younger sister called Maja who lives in Oslo"]
    new_id = live[0].id
    assert (await row(core, second)).superseded_by == new_id
    assert (await row(core, first)).superseded_by == new_id
    assert await actions(core, first) == ["merge"]  # the older one was folded in
    assert await actions(core, new_id) == ["supersede"]  # the kept one got the new text


async def test_threads_that_keep_coming_back_are_promoted_to_core(core: Core, alice: int) -> None:
    recurring = await memory(
        core,
        alice,
        "Training for the Copenhagen half marathon",
        category="goal",
        tier="active",
        expires_at=NOW + timedelta(days=30),
    )
    once = await memory(
        core,
        alice,
        "Thinking about repainting the kitchen",
        category="thread",
        tier="active",
        expires_at=NOW + timedelta(days=30),
    )
    async with core.sessions.begin() as db:
        short_id = (await db.get_one(Memory, recurring)).short_id
        for days_ago in (3, 0.1):
            refresh = MemoryEvent(
                user_id=alice,
                memory_id=recurring,
                action="refresh",
                actor="extraction",
                details={"short_id": short_id},
                created_at=NOW - timedelta(days=days_ago),
            )
            db.add(refresh)
        await db.execute(
            update(MemoryEvent)
            .where(MemoryEvent.memory_id == recurring, MemoryEvent.action == "create")
            .values(created_at=NOW - timedelta(days=9))
        )
        moving = Thread(user_id=alice, title="Moving to Aarhus", session_ids=[1, 2, 3, 2])
        one_off = Thread(user_id=alice, title="A one-off argument", session_ids=[4])
        db.add_all([moving, one_off])
        await db.flush()
        thread_ids = moving.id, one_off.id
    situation = await memory(
        core,
        alice,
        "Moving to Aarhus for a new job",
        category="thread",
        tier="active",
        expires_at=NOW + timedelta(days=30),
        thread_id=thread_ids[0],
    )
    await memory(
        core,
        alice,
        "Had a one-off argument with a neighbour",
        category="thread",
        tier="active",
        thread_id=thread_ids[1],
    )

    await run_nightly(deps_for(core))

    assert (await row(core, recurring)).valid_until == NOW
    assert (await row(core, situation)).valid_until == NOW  # the core version replaces it
    core_items = {m.content: m for m in await core.memories.live(alice, tier="core")}
    assert set(core_items) == {
        "Training for the Copenhagen half marathon",
        "Moving to Aarhus for a new job",
    }
    assert core_items["Moving to Aarhus for a new job"].thread_id == thread_ids[0]
    assert core_items["Training for the Copenhagen half marathon"].expires_at is None
    assert (await row(core, once)).tier == "active" and (await row(core, once)).valid_until is None
    async with core.sessions() as db:
        statuses = dict((await db.execute(select(Thread.title, Thread.status))).all())
    assert statuses == {"Moving to Aarhus": "promoted", "A one-off argument": "open"}


async def test_the_trash_is_purged_after_thirty_days(core: Core, alice: int) -> None:
    old = await memory(
        core, alice, "Old secret one", status="forgotten", forgotten_at=NOW - timedelta(days=31)
    )
    recent = await memory(
        core, alice, "Recent secret two", status="forgotten", forgotten_at=NOW - timedelta(days=5)
    )
    assert [m.id for m in await core.memories.trash(alice)] == [recent]
    await run_nightly(deps_for(core))
    async with core.sessions() as db:
        assert await db.get(Memory, old) is None
        assert await db.get(Memory, recent) is not None


async def test_stale_sessions_are_closed_and_extracted_and_expired_buttons_purged(
    core: Core, alice: int, scripted_llm: ScriptedLLM
) -> None:
    async with core.sessions.begin() as db:
        stale = SessionRow(
            user_id=alice,
            started_at=NOW - timedelta(hours=5),
            last_message_at=NOW - timedelta(hours=4),
        )
        db.add(stale)
        db.add(
            ButtonAction(
                token="old",
                user_id=alice,
                verb="forget",
                payload={},
                expires_at=NOW - timedelta(days=1),
            )
        )
    await run_nightly(deps_for(core))
    async with core.sessions() as db:
        closed = await db.get_one(SessionRow, stale.id)
        assert closed.closed_at == NOW - timedelta(hours=4)
        assert closed.extraction_due is False  # extracted by the patrol
        assert await db.get(ButtonAction, "old") is None


async def test_each_person_is_patrolled_once_a_night_at_three_local(
    core: Core, alice: int, clock: FakeClock
) -> None:
    deps = deps_for(core)
    report = await run_nightly(deps)
    assert report is not None and report.people == 1
    async with core.sessions() as db:
        next_at = await db.scalar(
            text("SELECT next_patrol_at FROM users WHERE id = :id"), {"id": alice}
        )
    assert next_at == datetime(2026, 3, 3, 2, 0, tzinfo=UTC)  # 03:00 CET
    clock.advance(minutes=30)
    again = await run_nightly(deps)
    assert again is not None and again.people == 0


async def test_new_people_get_their_first_patrol_at_their_next_local_night(
    core: Core, clock: FakeClock
) -> None:
    clock.current = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    bob = await add_person(core, "bob", tz="Europe/Copenhagen")
    report = await run_nightly(deps_for(core))
    assert report is not None and report.people == 0
    async with core.sessions() as db:
        first = await db.scalar(
            text("SELECT next_patrol_at FROM users WHERE id = :id"), {"id": bob}
        )
    assert first == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST, the DST night


async def test_only_one_process_runs_the_nightly_work(core: Core, alice: int) -> None:
    deps = deps_for(core)
    async with advisory_lock(core.engine, NIGHTLY_LOCK) as held:
        assert held
        assert await run_nightly(deps) is None
    reports = await asyncio.gather(run_nightly(deps), run_nightly(deps))
    assert sum(r.people for r in reports if r is not None) == 1


async def test_without_a_model_key_only_the_mechanical_steps_run(
    core: Core, alice: int, scripted_llm: ScriptedLLM
) -> None:
    expired = await memory(
        core,
        alice,
        "Feeling nervous about Friday",
        category="emotion",
        tier="active",
        expires_at=NOW - timedelta(hours=2),
    )
    await sessions_since(core, alice, NOW - timedelta(hours=10))
    with capture_logs() as logs:
        await run_nightly(deps_for(core, llm_steps=False))
    assert (await row(core, expired)).status == "dying"
    assert [e["event"] for e in logs].count("patrol.llm_steps_skipped") == 1
    assert scripted_llm.requests == []


async def test_imports_left_unstarted_for_a_week_are_deleted_with_their_words(
    core: Core, alice: int
) -> None:
    async def an_import(status: str, created: datetime) -> int:
        async with core.sessions.begin() as db:
            found = await db.execute(
                text(
                    "INSERT INTO imports (user_id, source, status, created_at, message_count) "
                    "VALUES (:uid, 'text', :status, :created, 1) RETURNING id"
                ),
                {"uid": alice, "status": status, "created": created},
            )
            import_id = int(found.scalar_one())
            stretch = SessionRow(
                user_id=alice,
                import_id=import_id,
                started_at=created,
                last_message_at=created,
                closed_at=created,
            )
            db.add(stretch)
            await db.flush()
            db.add(
                Message(
                    user_id=alice,
                    session_id=stretch.id,
                    platform="telegram",
                    role="user",
                    content="an old line",
                    import_id=import_id,
                    created_at=created,
                )
            )
        return import_id

    stale = await an_import("pending", NOW - timedelta(days=8))
    fresh = await an_import("pending", NOW - timedelta(days=6))
    started = await an_import("running", NOW - timedelta(days=30))

    report = await run_nightly(deps_for(core))

    assert report is not None and report.changes["pending_imports"] == 1
    async with core.sessions() as db:
        kept = set(
            await db.scalars(text("SELECT id FROM imports WHERE user_id = :u"), {"u": alice})
        )
        words = set(
            await db.scalars(
                select(Message.import_id).where(
                    Message.user_id == alice, Message.import_id.is_not(None)
                )
            )
        )
    assert kept == {fresh, started}
    assert words == {fresh, started}
    assert stale not in kept
