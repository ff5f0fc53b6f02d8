"""Threads: ongoing situations ("Job interview at Acme") that group active memories.

Extraction attaches every thread, goal or event memory to one of the person's threads:
one with the same title (normalised), else the thread of a live memory close in meaning,
else a new one. Each mention records the session it came up in, so the nightly patrol
can promote a situation that keeps coming back to core memory. Every statement here is
scoped to one person: another person's thread is never matched or touched.

A title may repeat words of a memory the person later asked to forget, so a thread with
a forgotten memory is tainted: its title is never shown, matched or promoted, and it is
withdrawn for good before the trash is purged (when the evidence of the taint goes).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import (
    ColumnElement,
    Float,
    Select,
    Update,
    and_,
    bindparam,
    exists,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memory.store.items import normalise_text
from memory.store.memory_batch import Embedding, MemoryBatch, current
from memory.store.tables import Memory, Thread

THREADED_CATEGORIES = frozenset({"thread", "goal", "event"})
LIVE_THREADS = ("open", "promoted")  # promoted threads still gather what is said of them
THREAD_SIMILARITY = 0.70  # a memory this close to one of a thread's is the same situation
MAX_TITLE_CHARS = 120
TITLES_COMPARED = 200  # the most recently seen threads whose titles a candidate may match

_TOUCH = text("""
UPDATE threads
SET session_ids = CASE WHEN CAST(:session AS bigint) = ANY(session_ids) THEN session_ids
                       ELSE array_append(session_ids, CAST(:session AS bigint)) END,
    last_seen_at = greatest(last_seen_at, CAST(:now AS timestamptz))
WHERE id = :id AND user_id = :user_id AND status IN ('open', 'promoted')
  AND NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.user_id = threads.user_id
                  AND m.thread_id = threads.id AND m.status = 'forgotten')
RETURNING id
""")


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """A thread as extraction shows it to the model."""

    id: int
    title: str


def thread_title(title: str | None, content: str) -> str:
    """The title to file a memory under: the model's, or the memory's own words."""
    chosen = " ".join((title or "").split()) or " ".join(content.split())
    return chosen[:MAX_TITLE_CHARS]


def untainted() -> ColumnElement[bool]:
    """A thread none of whose memories was forgotten (its title may be shown)."""
    member = aliased(Memory)
    return ~(
        exists()
        .where(
            member.user_id == Thread.user_id,
            member.thread_id == Thread.id,
            member.status == "forgotten",
        )
        .correlate(Thread)
    )


def withdraw_tainted(user_ids: Sequence[int] | None = None) -> Update:
    """The statement withdrawing, for good, the live threads with a forgotten memory (of
    these people, or everyone's): run it before forgotten memories are purged."""
    tainted = and_(Thread.status.in_(LIVE_THREADS), ~untainted())
    if user_ids is not None:
        tainted = and_(tainted, Thread.user_id.in_(list(user_ids)))
    return update(Thread).where(tainted).values(status="withdrawn")


@functools.cache
def _live_query() -> Select[int, str]:
    """Bound: `uid`, `limit`. Built once: building it is dearer than running it."""
    return (
        select(Thread.id, Thread.title)
        .where(Thread.user_id == bindparam("uid"), Thread.status.in_(LIVE_THREADS), untainted())
        .order_by(Thread.last_seen_at.desc(), Thread.id.desc())
        .limit(bindparam("limit"))
    )


async def live_threads(
    db: AsyncSession, user_id: int, *, limit: int = TITLES_COMPARED
) -> list[ThreadInfo]:
    """The person's live, untainted threads, most recently seen first."""
    rows = await db.execute(_live_query(), {"uid": user_id, "limit": limit})
    return [ThreadInfo(int(i), str(t)) for i, t in rows.all()]


def _by_title(threads: Sequence[ThreadInfo], title: str) -> int | None:
    key = normalise_text(title)
    return next((t.id for t in threads if normalise_text(t.title) == key), None)


async def _by_meaning(batch: MemoryBatch, vector: Embedding) -> int | None:
    """The live thread of the person's live memory closest to `vector`, if close enough."""
    distance = Memory.embedding.op("<=>", return_type=Float)([float(x) for x in vector])
    found = (
        await batch.db.execute(
            select(Memory.thread_id, (1 - distance).label("similarity"))
            .join(Thread, Thread.id == Memory.thread_id)
            .where(
                current(batch.user_id),
                Memory.embedding.is_not(None),
                Thread.user_id == batch.user_id,
                Thread.status.in_(LIVE_THREADS),
                untainted(),
            )
            .order_by(distance)
            .limit(1)
        )
    ).first()
    if found is None or found.similarity < THREAD_SIMILARITY:
        return None
    return int(found.thread_id)


async def touch(batch: MemoryBatch, thread_id: int, session_id: int) -> bool:
    """The situation came up again in `session_id` (each session counted once); False
    when the thread is not the person's, no longer live, or tainted."""
    touched = await batch.db.scalar(
        _TOUCH,
        {"session": session_id, "now": batch.now, "id": thread_id, "user_id": batch.user_id},
    )
    return touched is not None


async def attach(batch: MemoryBatch, title: str, vector: Embedding, session_id: int) -> int:
    """The id of the person's thread for this situation (found or opened), touched."""
    found = _by_title(await live_threads(batch.db, batch.user_id), title)
    if found is None:
        found = await _by_meaning(batch, vector)
    if found is not None:
        await touch(batch, found, session_id)
        return found
    row = Thread(
        user_id=batch.user_id,
        title=title,
        session_ids=[session_id],
        created_at=batch.now,
        last_seen_at=batch.now,
    )
    batch.db.add(row)
    await batch.db.flush()
    return int(row.id)


async def file_under(batch: MemoryBatch, memory_id: int, thread_id: int) -> None:
    """File a memory of the person's under a thread (grouping only; the text is unchanged)."""
    await batch.db.execute(
        update(Memory)
        .where(Memory.id == memory_id, Memory.user_id == batch.user_id)
        .values(thread_id=thread_id)
    )
