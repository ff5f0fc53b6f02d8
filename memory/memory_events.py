"""The memory audit trail: recording events, undoing them, and a memory's history.

Every function works inside a transaction the caller opened, so the event is written
together with the change it describes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.errors import MemoryNotFound, NothingToUndo
from memory.items import ACTORS, MemoryEventRecord
from memory.tables import Memory, MemoryEvent

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


async def forget_row(db: AsyncSession, row: Memory, *, actor: str, now: datetime) -> None:
    """Forget `row` and record it."""
    previous = mark_forgotten(row, now)
    await record_event(db, row=row, action="forget", actor=actor, now=now, previous_status=previous)


Undoer = Callable[[AsyncSession, Memory, MemoryEvent, datetime], Awaitable[Memory]]


async def _undo_create(db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime) -> Memory:
    if row.status == "forgotten":
        raise NothingToUndo("already forgotten")
    mark_forgotten(row, now)
    return row


async def _undo_forget(db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime) -> Memory:
    if row.status != "forgotten":
        raise NothingToUndo("not forgotten")
    mark_restored(row, str(event.details.get("previous_status", "active")))
    return row


async def _undo_supersede(
    db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime
) -> Memory:
    old = await db.scalar(
        select(Memory)
        .where(Memory.id == event.details.get("old_id"), Memory.user_id == row.user_id)
        .with_for_update()
    )
    if old is None or row.valid_until is not None or old.superseded_by != row.id:
        raise NothingToUndo("the memory changed since")
    old.valid_until = None
    old.superseded_by = None
    row.valid_until = now
    return old


async def _undo_pin(db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime) -> Memory:
    if not row.pinned:
        raise NothingToUndo("not pinned")
    row.pinned = False
    return row


async def _undo_unpin(db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime) -> Memory:
    if row.pinned:
        raise NothingToUndo("already pinned")
    row.pinned = True
    return row


async def _undo_restore(db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime) -> Memory:
    if row.status == "forgotten":
        raise NothingToUndo("already forgotten")
    mark_forgotten(row, now)
    return row


UNDOERS: dict[str, Undoer] = {
    "create": _undo_create,
    "forget": _undo_forget,
    "supersede": _undo_supersede,
    "pin": _undo_pin,
    "unpin": _undo_unpin,
    "restore": _undo_restore,
}


async def undo_event(
    db: AsyncSession, *, user_id: int, event_id: int, actor: str, now: datetime
) -> Memory:
    """Reverse one event of this person's; returns the memory that is current afterwards."""
    event = await db.scalar(
        select(MemoryEvent)
        .where(MemoryEvent.id == event_id, MemoryEvent.user_id == user_id)
        .with_for_update()
    )
    if event is None or event.memory_id is None:
        raise MemoryNotFound(f"no event {event_id}")
    undoer = UNDOERS.get(event.action)
    if undoer is None:
        raise NothingToUndo(f"{event.action} cannot be undone")
    if event.details.get("undone_by") is not None:
        raise NothingToUndo("already undone")
    row = await db.scalar(
        select(Memory)
        .where(Memory.id == event.memory_id, Memory.user_id == user_id)
        .with_for_update()
    )
    if row is None:
        raise MemoryNotFound(f"no memory for event {event_id}")
    current = await undoer(db, row, event, now)
    undo_id = await record_event(
        db,
        row=current,
        action="undo",
        actor=actor,
        now=now,
        undid=event.id,
        action_undone=event.action,
    )
    event.details = {**event.details, "undone_by": undo_id}
    return current


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
