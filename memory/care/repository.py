"""The memory repository with what a person may do to their memories: correct, forget,
restore and undo, and the purge of the trash.

It extends the store's `SqlMemories` (which only keeps rows) with the care operations,
each one transaction that writes its `memory_events` row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import structlog
from sqlalchemy import select

from memory.care.edits import edit_memory
from memory.care.forgetting import (
    TRASH_DAYS,
    forget_with_history,
    purge_forgotten,
    restore_with_history,
)
from memory.care.undo import undo_event
from memory.store.errors import MemoryNotFound
from memory.store.items import MemoryItem
from memory.store.memories import SqlMemories
from memory.store.memory_batch import to_item
from memory.store.memory_events import record_event
from memory.store.tables import Memory, MemoryEvent
from memory.store.threads import withdraw_tainted

log = structlog.get_logger(__name__)


class SqlMemoryRepository(SqlMemories):
    """Memories in PostgreSQL: add, supersede, forget, pin, undo, search."""

    async def edit(
        self,
        user_id: int,
        short_id: int,
        content: str,
        *,
        source_message_ids: Sequence[int],
        actor: str = "user",
    ) -> MemoryItem:
        """Correct a current memory in the person's own words: a new version (tier and pin
        kept, source `user`) from the messages `source_message_ids`; history is kept.
        With `actor` 'companion' (the chat model's `update_memory`) the source is kept."""
        try:
            (embedding,) = await self.embed([content])
        except Exception as exc:  # stored all the same; recall finds it by its words
            log.warning("memory.embedding_failed", user_id=user_id, error=type(exc).__name__)
            embedding = None
        async with self.batch(user_id) as batch:
            item = await edit_memory(
                batch,
                short_id,
                content,
                embedding=embedding,
                source_message_ids=source_message_ids,
                actor=actor,
            )
        log.info("memory.edited", user_id=user_id, memory_id=item.id, actor=actor)
        return item

    async def forget(self, user_id: int, short_id: int, *, actor: str = "user") -> MemoryItem:
        """Move a memory to the trash with its earlier versions, and hide the words it came
        from: it leaves every later prompt, summary and recall at once."""
        async with self.batch(user_id) as batch:
            row = await batch.row(short_id)
            if row.status != "forgotten":
                previous = await forget_with_history(batch.db, row, actor=actor, now=batch.now)
                await record_event(
                    batch.db,
                    row=row,
                    action="forget",
                    actor=actor,
                    now=batch.now,
                    previous_status=previous,
                )
            item = to_item(row)
        log.info("memory.forgotten", user_id=user_id, memory_id=item.id, actor=actor)
        return item

    async def restore(self, user_id: int, short_id: int, *, actor: str = "user") -> MemoryItem:
        """Take a memory (and what was forgotten along with it) out of the trash, back to
        the state it was forgotten in."""
        async with self.batch(user_id) as batch:
            row = await batch.row(short_id)
            if row.status != "forgotten":
                raise MemoryNotFound(f"m{short_id} is not in the trash")
            last_forget = await batch.db.scalar(
                select(MemoryEvent.details)
                .where(
                    MemoryEvent.user_id == user_id,
                    MemoryEvent.memory_id == row.id,
                    MemoryEvent.action == "forget",
                )
                .order_by(MemoryEvent.id.desc())
                .limit(1)
            )
            status = str((last_forget or {}).get("previous_status", "active"))
            await restore_with_history(batch.db, row, status)
            await record_event(batch.db, row=row, action="restore", actor=actor, now=batch.now)
            return to_item(row)

    async def undo(self, user_id: int, event_id: int, *, actor: str = "user") -> MemoryItem:
        """Reverse one change (create, supersede, forget, restore, pin, unpin)."""
        async with self.batch(user_id) as batch:
            row = await undo_event(
                batch.db, user_id=user_id, event_id=event_id, actor=actor, now=batch.now
            )
            item = to_item(row)
        log.info("memory.undone", user_id=user_id, event_id=event_id, actor=actor)
        return item

    async def purge_trash(self, now: datetime, older_than: timedelta = TRASH_DAYS) -> int:
        """Purge every person's memories forgotten more than `older_than` ago, with their
        earlier versions and the words they came from."""
        async with self._sessions.begin() as db:
            await db.execute(withdraw_tainted())
            owners = await db.scalars(
                select(Memory.user_id)
                .where(Memory.status == "forgotten", Memory.forgotten_at < now - older_than)
                .distinct()
            )
            purged = await purge_forgotten(db, user_ids=list(owners), before=now - older_than)
        log.info("memory.trash_purged", count=purged)
        return purged

    async def trash(self, user_id: int) -> list[MemoryItem]:
        """Memories forgotten within the last 30 days, newest first (as they were current
        when forgotten: earlier versions forgotten with them are not listed apart)."""
        since = self._clock.now() - TRASH_DAYS
        async with self._sessions() as db:
            rows = await db.scalars(
                select(Memory)
                .where(
                    Memory.user_id == user_id,
                    Memory.status == "forgotten",
                    Memory.forgotten_at > since,
                    Memory.valid_until.is_(None),
                )
                .order_by(Memory.forgotten_at.desc(), Memory.id.desc())
            )
            return [to_item(row) for row in rows]
