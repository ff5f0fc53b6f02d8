"""Unsure memories: extracted with middling confidence, kept recall-only and listed in
/memory as "not sure", and put to the person as "Did I get this right?" — at most one
question a day per person, each unsure memory at most once (the question is a memory
event, `ask`, so it is in the memory's history like everything else done to it).
"""

from __future__ import annotations

from datetime import timedelta

import structlog
from sqlalchemy import exists, select

from memory.store.items import MemoryItem
from memory.store.memories import SqlMemories
from memory.store.memory_batch import current, to_item
from memory.store.memory_events import record_event
from memory.store.tables import Memory, MemoryEvent

log = structlog.get_logger(__name__)

ASK_EVERY = timedelta(days=1)
ASKED = "ask"


async def next_to_ask(memories: SqlMemories, user_id: int) -> MemoryItem | None:
    """The person's oldest live unsure memory never asked about, recorded as asked now;
    None when there is none or they were asked within the last day."""
    async with memories.batch(user_id) as batch:
        recent = await batch.db.scalar(
            select(
                exists().where(
                    MemoryEvent.user_id == user_id,
                    MemoryEvent.action == ASKED,
                    MemoryEvent.created_at > batch.now - ASK_EVERY,
                )
            )
        )
        if recent:
            return None
        asked = exists().where(
            MemoryEvent.user_id == user_id,
            MemoryEvent.memory_id == Memory.id,
            MemoryEvent.action == ASKED,
        )
        row = await batch.db.scalar(
            select(Memory)
            .where(current(user_id), Memory.unsure, ~asked)
            .order_by(Memory.created_at, Memory.id)
            .limit(1)
            .with_for_update()
        )
        if row is None:
            return None
        await record_event(batch.db, row=row, action=ASKED, actor="companion", now=batch.now)
        log.info("memory.unsure_asked", user_id=user_id, memory_id=row.id)
        return to_item(row)
