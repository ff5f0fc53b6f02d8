"""Forgetting a memory for real: the memory together with every earlier version of it
(what it superseded or merged), and the words it came from; restoring them together;
and purging the trash after 30 days, words and all.

Each function works in the transaction its caller opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import delete, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.care.erasure import (
    erase_followup_texts,
    erase_messages,
    erase_thread_titles,
    hide_messages,
    related_messages,
    still_forgotten_messages,
    unhide_messages,
)
from memory.store.memory_events import mark_forgotten, mark_restored, record_event
from memory.store.tables import Memory, MemoryEvent

TRASH_DAYS = timedelta(days=30)  # forgotten memories stay restorable this long

_EARLIER = text("""
WITH RECURSIVE earlier(id) AS (
    SELECT m.id FROM memories AS m
    WHERE m.superseded_by = ANY(CAST(:ids AS bigint[]))
      AND m.user_id = ANY(CAST(:users AS bigint[]))
    UNION
    SELECT m.id FROM memories AS m JOIN earlier ON m.superseded_by = earlier.id
)
SELECT id FROM earlier
""")

_DOOMED = text("""
SELECT id, user_id FROM memories
WHERE user_id = ANY(CAST(:users AS bigint[])) AND status = 'forgotten' AND forgotten_at < :before
""")


async def earlier_version_ids(
    db: AsyncSession, *, user_ids: Sequence[int], memory_ids: Sequence[int]
) -> list[int]:
    """Every version these memories superseded or absorbed, directly or further back."""
    if not memory_ids:
        return []
    rows = await db.execute(_EARLIER, {"ids": list(memory_ids), "users": list(user_ids)})
    return sorted(int(row[0]) for row in rows)


async def _earlier_rows(db: AsyncSession, row: Memory) -> list[Memory]:
    ids = await earlier_version_ids(db, user_ids=[row.user_id], memory_ids=[row.id])
    if not ids:
        return []
    found = await db.scalars(
        select(Memory)
        .where(Memory.user_id == row.user_id, Memory.id.in_(ids))
        .order_by(Memory.id)
        .with_for_update()
    )
    return list(found)


async def forget_with_history(db: AsyncSession, row: Memory, *, actor: str, now: datetime) -> str:
    """Put `row` in the trash with every earlier version of it (each recorded, marked as
    forgotten along with `row`), and hide the words they came from. Returns the status
    `row` had; the caller records the event about `row` itself."""
    previous = mark_forgotten(row, now)
    forgotten = [row]
    for earlier in await _earlier_rows(db, row):
        if earlier.status == "forgotten":
            continue
        status = mark_forgotten(earlier, now)
        await record_event(
            db,
            row=earlier,
            action="forget",
            actor=actor,
            now=now,
            previous_status=status,
            along_with=row.id,
        )
        forgotten.append(earlier)
    await db.flush()
    words = await related_messages(db, memory_ids=[m.id for m in forgotten])
    await hide_messages(db, user_id=row.user_id, message_ids=sorted(words))
    return previous


async def restore_with_history(db: AsyncSession, row: Memory, status: str) -> None:
    """Take `row` out of the trash (back to `status`) with the earlier versions that were
    forgotten along with it, and show the words they came from again."""
    mark_restored(row, status)
    restored = [row]
    for earlier in await _earlier_rows(db, row):
        last = await db.scalar(
            select(MemoryEvent.details)
            .where(
                MemoryEvent.user_id == row.user_id,
                MemoryEvent.memory_id == earlier.id,
                MemoryEvent.action == "forget",
            )
            .order_by(MemoryEvent.id.desc())
            .limit(1)
        )
        if earlier.status == "forgotten" and last and last.get("along_with") == row.id:
            mark_restored(earlier, str(last.get("previous_status", "active")))
            restored.append(earlier)
    await db.flush()
    words = await related_messages(db, memory_ids=[m.id for m in restored])
    await unhide_messages(db, user_id=row.user_id, message_ids=sorted(words))


async def purge_forgotten(db: AsyncSession, *, user_ids: Sequence[int], before: datetime) -> int:
    """Delete these people's memories forgotten before `before`, with every earlier
    version of them; erase the words they came from (unless a memory still in the trash
    needs them), the outbox text of follow-ups about them and the titles of the threads
    they were filed under. Returns memories purged."""
    doomed_rows = (await db.execute(_DOOMED, {"users": list(user_ids), "before": before})).all()
    if not doomed_rows:
        return 0
    doomed = [int(r.id) for r in doomed_rows]
    owners = sorted({int(r.user_id) for r in doomed_rows})
    doomed += await earlier_version_ids(db, user_ids=owners, memory_ids=doomed)
    words = await related_messages(db, memory_ids=doomed)
    words -= await still_forgotten_messages(db, user_ids=owners, except_memory_ids=doomed)
    await erase_messages(db, user_ids=owners, message_ids=sorted(words))
    await erase_followup_texts(db, user_ids=owners, memory_ids=doomed)
    await erase_thread_titles(db, user_ids=owners, memory_ids=doomed)
    result = await db.execute(delete(Memory).where(Memory.id.in_(doomed)))
    return int(getattr(result, "rowcount", 0) or 0)
