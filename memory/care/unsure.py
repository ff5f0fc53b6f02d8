"""A person confirming a memory the companion was unsure of, from the memory panel.

Confirming firms it as the life cycle's affirmation does: no longer unsure, confidence
+0.15 (at most 1.0), `last_confirmed_at` stamped, one more mention. (Rejecting one is
forgetting it, the same use case as `/forget`.)
"""

from __future__ import annotations

from memory.care.repository import SqlMemoryRepository
from memory.store.errors import MemoryNotFound
from memory.store.items import MemoryItem
from memory.store.memory_batch import to_item
from memory.store.memory_events import record_event

CONFIRM_BOOST = 0.15


async def confirm_memory(memories: SqlMemoryRepository, user_id: int, short_id: int) -> MemoryItem:
    """Firm up the current memory `short_id`; `MemoryNotFound` when it is not current."""
    async with memories.batch(user_id) as batch:
        row = await batch.row(short_id)
        if not to_item(row).live:
            raise MemoryNotFound(f"m{short_id} is not current")
        row.unsure = False
        row.confidence = min(1.0, row.confidence + CONFIRM_BOOST)
        row.last_confirmed_at = batch.now
        row.mention_count = (row.mention_count or 1) + 1
        await record_event(batch.db, row=row, action="confirm", actor="user", now=batch.now)
        return to_item(row)
