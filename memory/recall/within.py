"""A turn's memory block within a deadline: recall never costs a reply.

The standing reads (pinned, core, what is going on, notes, the diary, the last
conversation) and recall (as much as the message needs, `need.py`, with the newest items
of the threads it touches) run side by side. When the deadline passes or either part
fails, the turn takes what is at hand: the block without recall when the standing reads
finished, else no memory at all (the turns alone). What happened is returned as
`degraded` ('recall_timeout', 'recall_error', 'context_timeout', 'context_error') for
the caller to log and count; nothing here raises for a failed read.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.local_time import zone_of
from memory.recall.context import AssembledContext, Line, compose, remembered
from memory.recall.need import RecallPlan, plan_recall
from memory.recall.retrieval import Recalled, recall
from memory.store.ports import Embedder
from memory.store.thread_views import thread_newest

log = structlog.get_logger(__name__)

T = TypeVar("T")

DEFAULT_DEADLINE = 0.3
"""Seconds a turn waits for its memory block (settable: `recall_deadline_ms`)."""


@dataclass(frozen=True, slots=True)
class TurnMemory:
    """A turn's memory block, the recall it planned, and why it was cut short (or None)."""

    context: AssembledContext
    plan: RecallPlan
    degraded: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Found:
    """What recall found, and the newest items of the threads it touched."""

    items: list[Recalled]
    along: tuple[Line, ...] = ()


async def assemble_within(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    *,
    user_id: int,
    query: str,
    now: datetime,
    timezone: str,
    budget_tokens: int,
    deadline: float = DEFAULT_DEADLINE,
    session_id: int | None = None,
    with_last_summary: bool = True,
    standing_since: datetime | None = None,
) -> TurnMemory:
    """The memory block for this turn, given at the latest `deadline` seconds from now.

    Like `context.assemble_context`, with recall sized to the message and threads
    brought along, and degrading instead of raising or waiting (see the module)."""
    started = time.perf_counter()
    zone = zone_of(timezone)
    plan = plan_recall(query, now)
    reading = asyncio.ensure_future(
        remembered(
            sessions,
            user_id=user_id,
            now=now,
            today=now.astimezone(zone).date(),
            session_id=session_id,
            with_last_summary=with_last_summary,
        )
    )
    finding = asyncio.ensure_future(
        _find(sessions, embedder, user_id, query, plan, now, session_id)
    )
    try:
        await asyncio.wait((reading, finding), timeout=max(deadline, 0.0))
    except asyncio.CancelledError:  # the turn itself was cancelled: so are its reads
        for task in (reading, finding):
            task.cancel()
            task.add_done_callback(_quietly)
        raise
    facts = _outcome(reading, "context")
    found = _outcome(finding, "recall")
    degraded = None
    if isinstance(facts, str):
        degraded = facts
        context = AssembledContext("", ())
    else:
        if isinstance(found, str):
            degraded = found
            found = Found([])
        context = compose(
            facts,
            found.items,
            now=now,
            zone=zone,
            budget=budget_tokens,
            standing_since=standing_since,
            along=found.along,
        )
    seconds = time.perf_counter() - started
    if degraded is not None:
        # A structured line: what failed and how long it took; never the message's text.
        log.warning(
            "memory.context_degraded",
            user_id=user_id,
            reason=degraded,
            need=plan.need,
            elapsed_ms=round(seconds * 1000, 1),
            deadline_ms=round(deadline * 1000, 1),
        )
    return TurnMemory(context, plan, degraded, seconds)


async def _find(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    user_id: int,
    query: str,
    plan: RecallPlan,
    now: datetime,
    session_id: int | None,
) -> Found:
    """Recall as the plan says, then the newest items of the threads it touched."""
    if plan.k <= 0:
        return Found([])
    items = await recall(
        sessions,
        embedder,
        user_id=user_id,
        query=query,
        k=plan.k,
        now=now,
        exclude_session_id=session_id,
    )
    # Only a memory of a thread brings others along: without one, no statement.
    memory_ids = [r.id for r in items if r.kind == "memory" and r.thread_id is not None]
    newest = await thread_newest(sessions, user_id=user_id, memory_ids=memory_ids, now=now)
    return Found(items, tuple(Line(a.content, a.id) for a in newest))


def _outcome(task: asyncio.Future[T], part: str) -> T | str:
    """The task's result, or why there is none ('<part>_timeout' or '<part>_error'); a
    task still running is cancelled and left to wind down on its own."""
    if not task.done():
        task.cancel()
        task.add_done_callback(_quietly)
        return f"{part}_timeout"
    if task.cancelled():
        return f"{part}_timeout"
    error = task.exception()
    if error is not None:
        log.warning(f"memory.{part}_failed", error=type(error).__name__)
        return f"{part}_error"
    return task.result()


def _quietly(task: asyncio.Future[Any]) -> None:
    """Retrieve a cancelled task's outcome so it is never reported as unhandled."""
    if not task.cancelled():
        task.exception()
