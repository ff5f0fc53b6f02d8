"""Reading what the scheduler's rules need about a batch of people in one query:
settings, reachability, when they last wrote, and the proactive messages since."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker


@dataclass(frozen=True, slots=True)
class Facts:
    """What the rules look at, read for one person in one query."""

    user_id: int
    timezone: str
    paused: bool
    reachable: bool
    quiet_start: time | None
    quiet_end: time | None
    last_user_at: datetime | None
    last_outreach_at: datetime | None
    unanswered: int
    timezone_known: bool = True


_FACTS = text("""
SELECT u.id, u.timezone, u.timezone_known, u.paused, u.quiet_start, u.quiet_end,
       u.reachable AND EXISTS (
           SELECT 1 FROM identities AS i
           WHERE i.user_id = u.id AND i.reachable AND i.chat_id IS NOT NULL
       ) AS reachable,
       wrote.created_at AS last_user_at,
       (SELECT max(coalesce(o.sent_at, o.created_at)) FROM outreach AS o
        WHERE o.user_id = u.id AND o.merged_into IS NULL
          AND o.status IN ('sent', 'unknown')) AS last_outreach_at,
       (SELECT count(*) FROM outreach AS o
        WHERE o.user_id = u.id AND o.merged_into IS NULL AND o.status IN ('sent', 'unknown')
          AND coalesce(o.sent_at, o.created_at)
              > coalesce(wrote.created_at, '-infinity'::timestamptz)) AS unanswered
FROM users AS u
LEFT JOIN LATERAL (
    SELECT m.created_at FROM messages AS m
    WHERE m.user_id = u.id AND m.role = 'user'
    ORDER BY m.id DESC LIMIT 1
) AS wrote ON true
WHERE u.id = ANY(CAST(:ids AS bigint[]))
""")


async def read_facts(
    sessions: async_sessionmaker[AsyncSession], user_ids: Sequence[int]
) -> dict[int, Facts]:
    """The rules' view of each person (people who no longer exist are absent)."""
    if not user_ids:
        return {}
    async with sessions() as db:
        rows = (await db.execute(_FACTS, {"ids": sorted(set(user_ids))})).all()
    return {
        row.id: Facts(
            user_id=row.id,
            timezone=row.timezone,
            paused=row.paused,
            reachable=bool(row.reachable),
            quiet_start=row.quiet_start,
            quiet_end=row.quiet_end,
            last_user_at=row.last_user_at,
            last_outreach_at=row.last_outreach_at,
            unanswered=int(row.unanswered),
            timezone_known=row.timezone_known,
        )
        for row in rows
    }
