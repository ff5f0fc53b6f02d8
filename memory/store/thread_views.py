"""Reading threads for people and prompts: the newest items of the threads a recall
touched (so a recalled step of an ongoing situation comes with where it stands now), and
the person's ongoing threads with their latest item (the "Ongoing" group of /memory).

Only live threads none of whose memories was forgotten (`threads.untainted`), and only
live memories that are sure and not over; every statement is scoped to one person.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, DateTime, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

PER_THREAD = 3
"""How many of a thread's newest items come along with a recalled one."""
ONGOING_LIMIT = 20

_LIVE_ITEM = """m.user_id = :uid AND m.valid_until IS NULL AND m.status IN ('active', 'dying')
      AND NOT m.unsure AND (m.expires_at IS NULL OR m.expires_at > :now)"""
_UNTAINTED = """t.user_id = :uid AND t.status IN ('open', 'promoted')
      AND NOT EXISTS (SELECT 1 FROM memories AS f WHERE f.user_id = t.user_id
                      AND f.thread_id = t.id AND f.status = 'forgotten')"""

_ALONG = text(f"""
SELECT id, content, thread_id FROM (
    SELECT m.id, m.content, m.thread_id,
           row_number() OVER (PARTITION BY m.thread_id ORDER BY m.created_at DESC, m.id DESC)
               AS place
    FROM memories AS m JOIN threads AS t ON t.id = m.thread_id
    WHERE {_LIVE_ITEM} AND {_UNTAINTED}
      AND m.thread_id IN (SELECT s.thread_id FROM memories AS s
                          WHERE s.user_id = :uid AND s.id = ANY (:ids)
                            AND s.thread_id IS NOT NULL)
) AS newest
WHERE place <= :per_thread
ORDER BY thread_id, place
""").bindparams(
    bindparam("ids", type_=ARRAY(BigInteger)), bindparam("now", type_=DateTime(timezone=True))
)

_ONGOING = text(f"""
SELECT t.id, t.title, t.last_seen_at, latest.short_id, latest.content, latest.items
FROM threads AS t
CROSS JOIN LATERAL (
    SELECT m.short_id, m.content, count(*) OVER () AS items
    FROM memories AS m
    WHERE {_LIVE_ITEM} AND m.thread_id = t.id
    ORDER BY m.created_at DESC, m.id DESC
    LIMIT 1
) AS latest
WHERE {_UNTAINTED}
ORDER BY t.last_seen_at DESC, t.id DESC
LIMIT :limit
""").bindparams(bindparam("now", type_=DateTime(timezone=True)))


@dataclass(frozen=True, slots=True)
class AlongItem:
    """One of the newest live items of a thread a recalled memory belongs to."""

    id: int
    content: str
    thread_id: int


@dataclass(frozen=True, slots=True)
class Ongoing:
    """A live thread and its latest live item (`items`: how many live items it has)."""

    thread_id: int
    title: str
    last_seen_at: datetime
    latest_short_id: int
    latest: str
    items: int

    @property
    def latest_label(self) -> str:
        """The latest item's label, as /memory shows it ('m12')."""
        return f"m{self.latest_short_id}"


async def thread_newest(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    memory_ids: Collection[int],
    now: datetime,
    per_thread: int = PER_THREAD,
) -> list[AlongItem]:
    """The newest `per_thread` live items of each thread one of `memory_ids` (the
    person's own) belongs to, newest first within a thread."""
    if not memory_ids or per_thread <= 0:
        return []
    params = {"uid": user_id, "ids": sorted(memory_ids), "now": now, "per_thread": per_thread}
    async with sessions() as db:
        rows = (await db.execute(_ALONG, params)).all()
    return [AlongItem(int(i), str(c), int(t)) for i, c, t in rows]


async def ongoing_threads(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    now: datetime,
    limit: int = ONGOING_LIMIT,
) -> list[Ongoing]:
    """The person's live threads that still have a live item, most recently seen first,
    each with its latest item."""
    params = {"uid": user_id, "now": now, "limit": limit}
    async with sessions() as db:
        rows = (await db.execute(_ONGOING, params)).all()
    return [
        Ongoing(int(i), str(title), seen, int(short), str(content), int(items))
        for i, title, seen, short, content, items in rows
    ]
