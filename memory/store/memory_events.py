"""The memory audit trail: recording events, and a memory's history.

Every function works inside a transaction the caller opened, so the event is written
together with the change it describes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.errors import MemoryNotFound
from memory.store.items import ACTORS, MemoryEventRecord
from memory.store.tables import Memory, MemoryEvent

MAX_VERSIONS = 100


def to_event(row: MemoryEvent) -> MemoryEventRecord:
    """An ORM event as a `MemoryEventRecord`."""
    return MemoryEventRecord(
        id=row.id,
        user_id=row.user_id,
        memory_id=row.memory_id,
        action=row.action,
        actor=row.actor,
        details=dict(row.details),
        created_at=row.created_at,
    )


async def record_event(
    db: AsyncSession,
    *,
    row: Memory,
    action: str,
    actor: str,
    now: datetime,
    **details: Any,
) -> int:
    """Write one audit-trail row about `row` (details must be JSON-ready)."""
    if actor not in ACTORS:
        raise ValueError(f"unknown actor: {actor!r}")
    event = MemoryEvent(
        user_id=row.user_id,
        memory_id=row.id,
        action=action,
        actor=actor,
        details={"short_id": row.short_id, **details},
        created_at=now,
    )
    db.add(event)
    await db.flush()
    return event.id


def mark_forgotten(row: Memory, now: datetime) -> str:
    """Move a memory to the trash; returns the status it had."""
    previous = row.status
    row.status = "forgotten"
    row.forgotten_at = now
    return previous


def mark_restored(row: Memory, status: str = "active") -> None:
    """Take a memory out of the trash."""
    row.status = status if status != "forgotten" else "active"
    row.forgotten_at = None


async def version_rows(db: AsyncSession, *, user_id: int, short_id: int) -> list[Memory]:
    """Every version of the memory `short_id` belongs to, oldest first."""
    row = await db.scalar(
        select(Memory).where(Memory.user_id == user_id, Memory.short_id == short_id)
    )
    if row is None:
        raise MemoryNotFound(f"no memory m{short_id}")
    chain = [row]
    while len(chain) < MAX_VERSIONS:
        earlier = await db.scalar(
            select(Memory).where(Memory.user_id == user_id, Memory.superseded_by == chain[0].id)
        )
        if earlier is None:
            break
        chain.insert(0, earlier)
    while len(chain) < MAX_VERSIONS and chain[-1].superseded_by is not None:
        later = await db.scalar(
            select(Memory).where(Memory.user_id == user_id, Memory.id == chain[-1].superseded_by)
        )
        if later is None:
            break
        chain.append(later)
    return chain


async def events_of(db: AsyncSession, *, user_id: int, memory_ids: list[int]) -> list[MemoryEvent]:
    """The events about these memories, oldest first."""
    rows = await db.scalars(
        select(MemoryEvent)
        .where(MemoryEvent.user_id == user_id, MemoryEvent.memory_id.in_(memory_ids))
        .order_by(MemoryEvent.id)
    )
    return list(rows.all())
