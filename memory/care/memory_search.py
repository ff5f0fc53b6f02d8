"""Searching a person's memories for the chat model's `search_memory` tool: hybrid recall
over their current memories and the faded ones (fading, retired, or past their expiry),
each found one counted as recalled and a retired one revived (`memory.care.revival`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.care.revival import revive_on_search
from memory.recall.retrieval import recall
from memory.store.items import MemoryItem
from memory.store.memory_batch import to_item
from memory.store.ports import Embedder
from memory.store.tables import Memory

MAX_FOUND = 8


@dataclass(frozen=True, slots=True)
class Found:
    """One memory the search found, as it is after the search."""

    item: MemoryItem
    faded: bool
    """It was fading ('dying'), retired ('dead') or past its expiry when found."""
    revived: bool
    """It was retired and is recallable again."""


async def search_memories(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    *,
    user_id: int,
    query: str,
    now: datetime,
    k: int = MAX_FOUND,
) -> list[Found]:
    """This person's memories (faded ones included) most relevant to `query`, best first;
    each counts as recalled, and the retired ones among them are revived."""
    recalled = await recall(
        sessions,
        embedder,
        user_id=user_id,
        query=query,
        k=k,
        now=now,
        include_messages=False,
        faded=True,
    )
    ids = [r.id for r in recalled if r.kind == "memory"]
    if not ids:
        return []
    before = await _rows(sessions, user_id, ids)
    revived = await revive_on_search(sessions, user_id=user_id, memory_ids=ids, now=now)
    after = await _rows(sessions, user_id, ids) if revived else before
    found = []
    for memory_id in ids:
        old, new = before.get(memory_id), after.get(memory_id)
        if old is None or new is None:
            continue
        faded = old.status != "active" or (old.expires_at is not None and old.expires_at < now)
        found.append(Found(new, faded=faded, revived=memory_id in revived))
    return found


async def _rows(
    sessions: async_sessionmaker[AsyncSession], user_id: int, ids: list[int]
) -> dict[int, MemoryItem]:
    async with sessions() as db:
        rows = await db.scalars(select(Memory).where(Memory.user_id == user_id, Memory.id.in_(ids)))
        return {row.id: to_item(row) for row in rows}
