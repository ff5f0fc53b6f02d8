"""Which people's local days the nightly diary should write about: days they talked on
that have no entry yet, for a whole batch in one query."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

_TALKED = text("""
SELECT v.user_id, v.day, v.start_at, v.end_at
FROM unnest(CAST(:ids AS bigint[]), CAST(:days AS date[]), CAST(:starts AS timestamptz[]),
            CAST(:ends AS timestamptz[])) AS v(user_id, day, start_at, end_at)
WHERE EXISTS (SELECT 1 FROM sessions AS s
              WHERE s.user_id = v.user_id AND s.last_message_at >= v.start_at
                AND s.started_at < v.end_at)
  AND NOT EXISTS (SELECT 1 FROM diary_entries AS d
                  WHERE d.user_id = v.user_id AND d.local_date = v.day)
""")


@dataclass(frozen=True, slots=True)
class LocalDay:
    """A person's local calendar day, as a UTC interval."""

    user_id: int
    day: date
    start: datetime
    end: datetime


async def talked_without_entry(
    sessions: async_sessionmaker[AsyncSession], days: Sequence[LocalDay]
) -> list[int]:
    """Of `days` (one per person), the people who had a conversation in theirs and have
    no diary entry for it yet."""
    if not days:
        return []
    params = {
        "ids": [d.user_id for d in days],
        "days": [d.day for d in days],
        "starts": [d.start for d in days],
        "ends": [d.end for d in days],
    }
    async with sessions() as db:
        rows = (await db.execute(_TALKED, params)).all()
    return [row.user_id for row in rows]
