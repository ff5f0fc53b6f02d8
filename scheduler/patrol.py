"""The nightly patrol and diary, per person at about 03:00 in their timezone.

`run_nightly` takes a PostgreSQL advisory lock so only one process runs it; it claims
people whose `next_patrol_at` has passed in batches, runs the mechanical steps for the
whole batch in one transaction (and moves their next patrol to tomorrow night), then
the steps that need the model: extraction retries, merge text, the diary. Without a
model key only the mechanical steps run (one log line says so). Each run's time per step
goes to the `companion_patrol_step_duration_seconds` histogram (the whole run is the
`nightly` job's duration).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import structlog

from bot import metrics
from bot.timing import next_checkin
from memory.care.patrol_steps import batch_of, run_mechanical
from memory.learning.extraction import extract_session
from memory.learning.session_summary import rebuild_stale_summaries
from memory.store.actions import SqlActionStore
from memory.store.database import DbSession
from memory.store.imports import expire_pending_imports
from memory.store.patrol import (
    Batch,
    PatrolPerson,
    advisory_lock,
    lock_due,
    lock_unscheduled,
    sessions_due_extraction,
    set_next_patrols,
)
from scheduler.deps import SchedulerDeps
from scheduler.diary import write_diaries
from scheduler.merge import find_folds, fold, merge_with_model, promote

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

NIGHTLY_LOCK = 7243502  # pg advisory lock key (7243501 serialises migrations)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LLM_STEPS = frozenset({"extract", "summaries", "diary"})  # merge falls back to the mechanical fold


@dataclass
class PatrolReport:
    """What one nightly run did: people, rows changed per step, seconds per step."""

    people: int = 0
    changes: Counter[str] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))


@dataclass(frozen=True, slots=True)
class _Claimed:
    batch: Batch
    timezones: tuple[str, ...]
    compare_since: tuple[datetime, ...]


async def schedule_patrols(deps: SchedulerDeps, *, now: datetime) -> int:
    """Give people without one their first patrol time (their next local 03:00)."""
    scheduled = 0
    while True:
        async with deps.sessions.begin() as db:
            rows = await lock_unscheduled(db, limit=deps.config.patrol_batch)
            if rows:
                await _advance(db, deps, rows, now, first=True)
        scheduled += len(rows)
        if len(rows) < deps.config.patrol_batch:
            return scheduled


async def _advance(
    db: DbSession,
    deps: SchedulerDeps,
    people: Sequence[PatrolPerson],
    now: datetime,
    *,
    first: bool = False,
) -> None:
    """Next patrol at each person's next local patrol time; the last one now."""
    await set_next_patrols(
        db,
        [p.id for p in people],
        [next_checkin(now, p.timezone, deps.config.patrol_time) for p in people],
        patrolled_at=None if first else now,
    )


async def _claim(deps: SchedulerDeps, report: PatrolReport, now: datetime) -> _Claimed | None:
    """Claim one batch of due people and run the mechanical steps, in one transaction."""
    started = time.perf_counter()
    async with deps.sessions.begin() as db:
        rows = await lock_due(db, now=now, limit=deps.config.patrol_batch)
        if not rows:
            return None
        batch = batch_of([(r.id, r.last_patrol_at) for r in rows], now)
        days = deps.config.memory_retention_days
        changes = await run_mechanical(
            db,
            batch,
            now=now,
            idle_gap=deps.config.idle_gap,
            retention=timedelta(days=days) if days > 0 else None,
        )
        await _advance(db, deps, rows, now)
    report.people += len(rows)
    report.changes.update(changes)
    report.seconds["mechanical"] += time.perf_counter() - started
    compare_since = tuple(r.last_patrol_at or EPOCH for r in rows)
    return _Claimed(batch, tuple(r.timezone for r in rows), compare_since)


async def _bounded(deps: SchedulerDeps, work: Sequence[Awaitable[_T]]) -> list[_T]:
    """Run the model-bound `work` a few at a time (the configured concurrency)."""
    gate = asyncio.Semaphore(deps.config.concurrency)

    async def one(item: Awaitable[_T]) -> _T:
        async with gate:
            return await item

    return list(await asyncio.gather(*(one(w) for w in work)))


async def _retry_extractions(deps: SchedulerDeps, claimed: _Claimed) -> int:
    """Extract every session of theirs still due, failing ones included (no notices)."""
    due = await sessions_due_extraction(deps.sessions, claimed.batch.ids)
    timezone = dict(zip(claimed.batch.ids, claimed.timezones, strict=True))
    await _bounded(
        deps,
        [
            extract_session(
                user_id=user_id,
                session_id=session_id,
                sessions=deps.sessions,
                memories=deps.memories,
                llm=deps.tool_caller,
                embedder=deps.embedder,
                clock=deps.clock,
                timezone=timezone[user_id],
            )
            for user_id, session_id in due
        ],
    )
    return len(due)


async def _merge(deps: SchedulerDeps, claimed: _Claimed, now: datetime) -> int:
    """Fold near-duplicates; with a model its text first, mechanically when it fails."""
    folds = await find_folds(deps, claimed.batch, claimed.compare_since)
    written = [False] * len(folds)
    if deps.config.llm_steps:
        written = await _bounded(deps, [merge_with_model(deps, f, now=now) for f in folds])
    await fold(deps, [f for f, done in zip(folds, written, strict=True) if not done], now=now)
    return len(folds)


async def _rebuild_summaries(deps: SchedulerDeps, people: list[tuple[int, str]]) -> int:
    """Summaries dropped because words in them were forgotten or restored, written again
    from what is visible now."""
    return await rebuild_stale_summaries(
        deps.sessions, people=people, llm=deps.tool_caller, embedder=deps.embedder
    )


async def patrol_batch(deps: SchedulerDeps, report: PatrolReport) -> bool:
    """Patrol the next batch of due people; False when nobody is due."""
    now = deps.clock.now()
    claimed = await _claim(deps, report, now)
    if claimed is None:
        return False
    people = list(zip(claimed.batch.ids, claimed.timezones, strict=True))
    steps: list[tuple[str, Callable[[], Awaitable[int]]]] = [
        ("extract", lambda: _retry_extractions(deps, claimed)),
        ("merge", lambda: _merge(deps, claimed, now)),
        ("promote", lambda: promote(deps, claimed.batch, now=now)),
        ("summaries", lambda: _rebuild_summaries(deps, people)),
        ("diary", lambda: write_diaries(deps, people, now)),
    ]
    for name, step in steps:
        if name in LLM_STEPS and not deps.config.llm_steps:
            continue
        started = time.perf_counter()
        report.changes[name] += await step()
        report.seconds[name] += time.perf_counter() - started
    return True


async def run_nightly(deps: SchedulerDeps) -> PatrolReport | None:
    """Patrol everyone whose night has come, batch by batch, under the advisory lock;
    None when another process holds it."""
    async with advisory_lock(deps.engine, NIGHTLY_LOCK) as held:
        if not held:
            log.info("patrol.locked_elsewhere")
            return None
        started = time.perf_counter()
        report = PatrolReport()
        await schedule_patrols(deps, now=deps.clock.now())
        while await patrol_batch(deps, report):
            pass
        if report.people:
            purge_started = time.perf_counter()
            await SqlActionStore(deps.sessions).purge_expired(deps.clock.now())
            report.changes["pending_imports"] += await expire_pending_imports(
                deps.sessions, created_before=deps.clock.now() - deps.config.pending_import_kept
            )
            report.seconds["purge"] += time.perf_counter() - purge_started
            for step, seconds in report.seconds.items():
                metrics.record_patrol_step(step, seconds)
            if not deps.config.llm_steps:
                log.info("patrol.llm_steps_skipped", reason="no language model key")
            log.info(
                "patrol.done",
                people=report.people,
                seconds=round(time.perf_counter() - started, 3),
                **{f"{k}_changes": v for k, v in report.changes.items()},
                **{f"{k}_seconds": round(v, 3) for k, v in report.seconds.items()},
            )
        return report
