"""The nightly patrol's bookkeeping: who is due (locked with SKIP LOCKED), when each
person's next patrol is, whose sessions still wait for extraction, and the advisory lock
that lets one process patrol at a time. What the patrol does to memories is
`memory.care.patrol_steps`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

_UNSCHEDULED = text("""
SELECT id, timezone FROM users WHERE next_patrol_at IS NULL
LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED
""")
_DUE = text("""
SELECT id, timezone, last_patrol_at FROM users WHERE next_patrol_at <= :now
ORDER BY next_patrol_at LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED
""")
_ADVANCE = text("""
UPDATE users AS u SET next_patrol_at = v.next_at,
                      last_patrol_at = coalesce(CAST(:now AS timestamptz), u.last_patrol_at)
FROM unnest(CAST(:ids AS bigint[]), CAST(:next_at AS timestamptz[])) AS v(id, next_at)
WHERE u.id = v.id
""")
_DUE_EXTRACTIONS = text("""
SELECT s.user_id, s.id FROM sessions AS s
WHERE s.user_id = ANY(CAST(:ids AS bigint[])) AND s.extraction_due ORDER BY s.id
""")


@dataclass(frozen=True, slots=True)
class Batch:
    """People patrolled together, with when each was last patrolled."""

    ids: tuple[int, ...]
    since: tuple[datetime, ...]


@dataclass(frozen=True, slots=True)
class PatrolPerson:
    """A person as the patrol schedule sees them."""

    id: int
    timezone: str
    last_patrol_at: datetime | None


@asynccontextmanager
async def advisory_lock(engine: AsyncEngine, key: int) -> AsyncIterator[bool]:
    """Try a session-level advisory lock on a connection of its own (no transaction held
    open); yields whether it was taken. A crashed holder's lock goes with its connection."""
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        held = bool(await conn.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}))
        try:
            yield held
        finally:
            if held:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})


async def lock_unscheduled(db: AsyncSession, *, limit: int) -> list[PatrolPerson]:
    """Up to `limit` people without a patrol time, locked for this transaction."""
    rows = (await db.execute(_UNSCHEDULED, {"limit": limit})).all()
    return [PatrolPerson(r.id, r.timezone, None) for r in rows]


async def lock_due(db: AsyncSession, *, now: datetime, limit: int) -> list[PatrolPerson]:
    """Up to `limit` people whose patrol time has passed, longest due first, locked."""
    rows = (await db.execute(_DUE, {"now": now, "limit": limit})).all()
    return [PatrolPerson(r.id, r.timezone, r.last_patrol_at) for r in rows]


async def set_next_patrols(
    db: AsyncSession,
    ids: Sequence[int],
    next_at: Sequence[datetime | None],
    *,
    patrolled_at: datetime | None,
) -> None:
    """Each person's next patrol; `patrolled_at` (when given) becomes their last one."""
    params = {"ids": list(ids), "next_at": list(next_at), "now": patrolled_at}
    await db.execute(_ADVANCE, params)


async def sessions_due_extraction(
    sessions: async_sessionmaker[AsyncSession], user_ids: Sequence[int]
) -> list[tuple[int, int]]:
    """(person, session) pairs of `user_ids` whose extraction is still due, oldest first."""
    async with sessions() as db:
        rows = (await db.execute(_DUE_EXTRACTIONS, {"ids": list(user_ids)})).all()
    return [(r.user_id, r.id) for r in rows]
