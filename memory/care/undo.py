"""Undoing one memory event (create, supersede, forget, restore, pin, unpin), recorded as
an `undo` event. Undoing what put a memory in the trash or took it out moves its earlier
versions and its words with it, as forgetting and restoring do.

Works in the transaction its caller opened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.care.forgetting import forget_with_history, restore_with_history
from memory.store.errors import MemoryNotFound, NothingToUndo
from memory.store.memory_events import record_event
from memory.store.tables import Memory, MemoryEvent

# (transaction, the event's memory, the event, now, who is undoing) → the current memory
Undoer = Callable[[AsyncSession, Memory, MemoryEvent, datetime, str], Awaitable[Memory]]


async def _forget_again(
    db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime, actor: str
) -> Memory:
    """Undo a memory's creation or its restore from the trash: it goes (back) to the trash."""
    if row.status == "forgotten":
        raise NothingToUndo("already forgotten")
    await forget_with_history(db, row, actor=actor, now=now)
    return row


async def _undo_forget(
    db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime, actor: str
) -> Memory:
    if row.status != "forgotten":
        raise NothingToUndo("not forgotten")
    await restore_with_history(db, row, str(event.details.get("previous_status", "active")))
    return row


async def _undo_supersede(
    db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime, actor: str
) -> Memory:
    """The older version is current again; the newer one goes to the trash (not shown
    there: it is no longer current) with the words it came from."""
    old = await db.scalar(
        select(Memory)
        .where(Memory.id == event.details.get("old_id"), Memory.user_id == row.user_id)
        .with_for_update()
    )
    if (
        old is None
        or row.valid_until is not None
        or row.status == "forgotten"
        or old.superseded_by != row.id
    ):
        raise NothingToUndo("the memory changed since")
    old.valid_until = None
    old.superseded_by = None
    row.valid_until = now
    await db.flush()
    await forget_with_history(db, row, actor=actor, now=now)
    return old


def _pinned_back(pinned: bool, already: str) -> Undoer:
    """Undo a pin or an unpin: `pinned` again, unless the memory is so already."""

    async def undo(
        db: AsyncSession, row: Memory, event: MemoryEvent, now: datetime, actor: str
    ) -> Memory:
        if row.pinned == pinned:
            raise NothingToUndo(already)
        row.pinned = pinned
        return row

    return undo


UNDOERS: dict[str, Undoer] = {
    "create": _forget_again,
    "forget": _undo_forget,
    "supersede": _undo_supersede,
    "pin": _pinned_back(False, "not pinned"),
    "unpin": _pinned_back(True, "already pinned"),
    "restore": _forget_again,
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
    current = await undoer(db, row, event, now, actor)
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
