"""What the memory panel shows in one read: a person's current memories (live and
faded), the earlier versions of each, and their ongoing threads."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.items import MemoryItem
from memory.store.memory_batch import current, to_item
from memory.store.tables import Memory
from memory.store.threads import ThreadInfo, live_threads

SHOWN_STATUSES = ("active", "dying", "dead")  # forgotten ones are in the trash
MAX_SHOWN = 2000
MAX_THREADS = 50


@dataclass(frozen=True, slots=True)
class PanelSnapshot:
    """`items` are current versions (live and faded); `versions[item.id]` the earlier
    versions of each, oldest first; `threads` the live threads."""

    items: tuple[MemoryItem, ...]
    versions: dict[int, tuple[MemoryItem, ...]]
    threads: tuple[ThreadInfo, ...]


async def panel_snapshot(sessions: async_sessionmaker[AsyncSession], user_id: int) -> PanelSnapshot:
    """Everything the panel shows of one person's memories."""
    query = (
        select(Memory)
        .where(
            or_(
                current(user_id, SHOWN_STATUSES),
                (Memory.user_id == user_id)
                & Memory.valid_until.is_not(None)
                & (Memory.status != "forgotten"),
            )
        )
        .order_by(Memory.id)
        .limit(MAX_SHOWN)
    )
    async with sessions() as db:
        rows = [to_item(row) for row in await db.scalars(query)]
        threads = await live_threads(db, user_id, limit=MAX_THREADS)
    items = tuple(row for row in rows if row.valid_until is None)
    return PanelSnapshot(items, _chains(rows, items), tuple(threads))


def _chains(
    rows: list[MemoryItem], items: tuple[MemoryItem, ...]
) -> dict[int, tuple[MemoryItem, ...]]:
    """Earlier versions of each current item, following `superseded_by` back."""
    earlier = {row.superseded_by: row for row in rows if row.superseded_by is not None}
    chains: dict[int, tuple[MemoryItem, ...]] = {}
    for item in items:
        chain: list[MemoryItem] = []
        cursor = earlier.get(item.id)
        while cursor is not None and len(chain) < 50:
            chain.insert(0, cursor)
            cursor = earlier.get(cursor.id)
        if chain:
            chains[item.id] = tuple(chain)
    return chains
