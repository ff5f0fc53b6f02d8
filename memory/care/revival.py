"""Reviving on search: what the chat model's `search_memory` finds counts as a recall
(the activation the life cycle counts, recorded by the same call the turn's recall uses),
and a retired ('dead') memory it finds becomes recallable again.

A found dead memory goes back to 'dying': live, so recall finds it again, and its decay
clock restarts as for any recalled memory; like every dying memory it stays out of the
standing block until the person affirms it (`memory.learning.affirmation`). The change is
recorded as a `revive` event (actor 'companion'), as the patrol records its own.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.retrieval import mark_recalled
from memory.store.memory_events import record_event
from memory.store.tables import Memory

REVIVED_STATUS = "dying"
"""Where a found dead memory goes: live again, recall-only until affirmed."""


async def revive_on_search(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    memory_ids: Collection[int],
    now: datetime,
) -> set[int]:
    """Count a recall of each found memory of this person and bring the dead ones among
    them back to `REVIVED_STATUS`; returns the ids revived."""
    if not memory_ids:
        return set()
    await mark_recalled(sessions, user_id=user_id, memory_ids=memory_ids, now=now)
    revived: set[int] = set()
    async with sessions.begin() as db:
        rows = await db.scalars(
            select(Memory)
            .where(
                Memory.user_id == user_id,
                Memory.id.in_(list(memory_ids)),
                Memory.status == "dead",
                Memory.valid_until.is_(None),
            )
            .with_for_update()
        )
        for row in rows:
            row.status = REVIVED_STATUS
            await record_event(
                db,
                row=row,
                action="revive",
                actor="companion",
                now=now,
                previous_status="dead",
                status=REVIVED_STATUS,
                by="search",
            )
            revived.add(row.id)
    return revived
