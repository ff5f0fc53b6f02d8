"""Claiming work, set-based: due check-ins (people locked with SKIP LOCKED, their next
check-in advanced and the outbox row written in one transaction), the follow-ups folded
into them or due on their own, and people who have no check-in scheduled yet.

Only rows this transaction inserted are processed: the unique idempotency key makes a
second process (or a second run) find nothing to do. Rows that are final the moment
they are written (a check-in missed by more than the grace window) are counted in the
outreach metric here, once committed; every other row is counted when it is dispatched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from functools import lru_cache

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot import metrics
from bot.timing import next_checkin
from memory.local_time import local_date, zone_of
from scheduler.deps import SchedulerConfig
from scheduler.outbox import Claim, new_token

_DUE_PEOPLE = text("""
SELECT id, timezone, checkin_time, paused, next_checkin_at FROM users
WHERE next_checkin_at <= :now
ORDER BY next_checkin_at
LIMIT :limit
FOR NO KEY UPDATE SKIP LOCKED
""")

_UNSCHEDULED = text("""
SELECT id, timezone, checkin_time, paused, next_checkin_at FROM users
WHERE next_checkin_at IS NULL AND checkin_time IS NOT NULL AND NOT paused
  AND timezone_known
LIMIT :limit
FOR NO KEY UPDATE SKIP LOCKED
""")

_ADVANCE_SQL = """
UPDATE users AS u SET next_checkin_at = v.next_at
FROM unnest(CAST(:ids AS bigint[]), CAST(:next_at AS timestamptz[])) AS v(id, next_at)
WHERE u.id = v.id
"""
_ADVANCE = text(_ADVANCE_SQL)

# The claim's writes in one statement: advance the batch's next check-in, write today's
# check-in rows, and fold the due follow-ups into the check-ins actually claimed (pending
# and new: a row that already existed conflicts and is not returned).
_CLAIM = text(f"""
WITH advanced AS ({_ADVANCE_SQL}), checkins AS (
    INSERT INTO outreach (user_id, kind, idempotency_key, status, reason, due_at, lease_until,
                          claim_token, created_at)
    SELECT v.user_id, 'checkin', v.key, v.status, v.reason, v.due_at,
           CASE WHEN v.status = 'pending' THEN CAST(:lease_until AS timestamptz) END,
           CASE WHEN v.status = 'pending' THEN CAST(:token AS text) END,
           CAST(:now AS timestamptz)
    FROM unnest(CAST(:user_ids AS bigint[]), CAST(:keys AS text[]), CAST(:statuses AS text[]),
                CAST(:reasons AS text[]), CAST(:due AS timestamptz[]))
         AS v(user_id, key, status, reason, due_at)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, user_id, kind, status, reason, due_at
), folded AS (
    INSERT INTO outreach (user_id, kind, idempotency_key, memory_id, merged_into, status, due_at,
                          created_at)
    SELECT f.user_id, 'followup', f.key, f.memory_id, c.id, 'pending', CAST(:now AS timestamptz),
           CAST(:now AS timestamptz)
    FROM unnest(CAST(:event_user_ids AS bigint[]), CAST(:event_ids AS bigint[]),
                CAST(:event_keys AS text[])) AS f(user_id, memory_id, key)
    JOIN checkins AS c ON c.user_id = f.user_id AND c.status = 'pending'
    ON CONFLICT (idempotency_key) DO NOTHING
)
SELECT * FROM checkins
""")

_INSERT = text("""
INSERT INTO outreach (user_id, kind, idempotency_key, memory_id, merged_into, status, reason,
                      due_at, lease_until, claim_token, created_at)
SELECT v.user_id, v.kind, v.key, v.memory_id, v.merged_into, v.status, v.reason, v.due_at,
       CASE WHEN v.status = 'pending' AND v.merged_into IS NULL
            THEN CAST(:lease_until AS timestamptz) END,
       CASE WHEN v.status = 'pending' AND v.merged_into IS NULL THEN CAST(:token AS text) END,
       CAST(:now AS timestamptz)
FROM unnest(CAST(:user_ids AS bigint[]), CAST(:kinds AS text[]), CAST(:keys AS text[]),
            CAST(:memory_ids AS bigint[]), CAST(:merged_into AS bigint[]),
            CAST(:statuses AS text[]), CAST(:reasons AS text[]), CAST(:due AS timestamptz[]))
     AS v(user_id, kind, key, memory_id, merged_into, status, reason, due_at)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id, user_id, kind, status, reason, due_at
""")

# Live events in the follow-up window (the columns of ix_memories_person_events, so a
# batch's lookup reads only that index).
_LIVE_EVENTS = """SELECT id, user_id, event_at, created_at FROM memories
    WHERE category = 'event' AND valid_until IS NULL AND status IN ('active', 'dying')
      AND event_at <= :latest AND event_at > :earliest"""
# OFFSET 0 keeps each NOT EXISTS a lookup per candidate event in the outbox's indexes:
# as an anti join the planner may hash the whole outbox, which grows every day.
_DUE_EVENTS = """
SELECT m.id, m.user_id, m.event_at, m.created_at, u.timezone, u.next_checkin_at
FROM {source} JOIN users AS u ON u.id = m.user_id
WHERE (m.event_at, m.id) > (:after_at, :after_id) AND u.timezone_known
  AND NOT EXISTS (SELECT 1 FROM outreach AS o
                  WHERE o.idempotency_key = 'followup:' || m.user_id || ':' || m.id
                  OFFSET 0)
  AND NOT EXISTS (SELECT 1 FROM memories AS p JOIN outreach AS o ON o.memory_id = p.id
                  WHERE p.user_id = m.user_id AND p.superseded_by = m.id
                    AND p.event_at = m.event_at
                  OFFSET 0)
ORDER BY m.event_at, m.id
LIMIT :limit
"""
_EVERYONE = f"({_LIVE_EVENTS}) AS m"
# For a batch of people, look each one's events up by person: scanning everyone's due
# events and keeping the batch's read thousands of rows for a handful.
_THESE_PEOPLE = f"""unnest(CAST(:user_ids AS bigint[])) AS these(user_id)
CROSS JOIN LATERAL (
    {_LIVE_EVENTS} AND user_id = these.user_id
    OFFSET 0  -- keep this a per-person index lookup, whatever the planner guesses
) AS m"""


@dataclass(frozen=True, slots=True)
class DueEvent:
    """A remembered event whose follow-up is due now."""

    memory_id: int
    user_id: int
    event_at: datetime
    timezone: str
    next_checkin_at: datetime | None


@dataclass(frozen=True, slots=True)
class _Inserted:
    """An outreach row as inserted."""

    id: int
    user_id: int
    kind: str
    status: str
    reason: str | None
    due_at: datetime


@dataclass(frozen=True, slots=True)
class _Row:
    """An outreach row to insert."""

    user_id: int
    kind: str
    key: str
    due_at: datetime
    status: str = "pending"
    reason: str | None = None
    memory_id: int | None = None
    merged_into: int | None = None


def effective_time(event_at: datetime, tz_name: str) -> datetime:
    """When an event is over enough to ask about it: a date without a time (local
    midnight) counts from the end of that day."""
    local = event_at.astimezone(zone_of(tz_name))
    return event_at + timedelta(days=1) if local.time() == time(0, 0) else event_at


def checkin_key(user_id: int, due_at: datetime, tz_name: str) -> str:
    """One check-in per person per local date."""
    return f"checkin:{user_id}:{_local_day(due_at, tz_name)}"


@lru_cache(maxsize=4096)
def _local_day(instant: datetime, tz_name: str) -> str:
    """The local date at `instant`, ISO-formatted (a batch shares a few instants)."""
    return local_date(instant, tz_name).isoformat()


def followup_key(user_id: int, memory_id: int) -> str:
    """One follow-up per remembered event."""
    return f"followup:{user_id}:{memory_id}"


def _columns(rows: Sequence[_Row]) -> dict[str, list[object]]:
    """The columns every outreach insert takes, as arrays (one element per row)."""
    return {
        "user_ids": [r.user_id for r in rows],
        "keys": [r.key for r in rows],
        "statuses": [r.status for r in rows],
        "reasons": [r.reason for r in rows],
        "due": [r.due_at for r in rows],
    }


async def _insert(
    db: AsyncSession, rows: Sequence[_Row], *, now: datetime, token: str, lease_until: datetime
) -> list[_Inserted]:
    if not rows:
        return []
    params = {
        **_columns(rows),
        "kinds": [r.kind for r in rows],
        "memory_ids": [r.memory_id for r in rows],
        "merged_into": [r.merged_into for r in rows],
        "now": now,
        "token": token,
        "lease_until": lease_until,
    }
    result = await db.execute(_INSERT, params)
    return [_Inserted(r.id, r.user_id, r.kind, r.status, r.reason, r.due_at) for r in result.all()]


async def due_events(
    db: AsyncSession,
    *,
    now: datetime,
    config: SchedulerConfig,
    user_ids: Sequence[int] | None = None,
    after: tuple[datetime, int] | None = None,
    limit: int = 500,
) -> tuple[list[DueEvent], tuple[datetime, int] | None]:
    """Events whose follow-up is due and not yet claimed, mentioned before they happened;
    and the keyset position to continue from (None when there are no more)."""
    source = _THESE_PEOPLE if user_ids is not None else _EVERYONE
    earliest = now - config.followup_window - timedelta(days=1)
    params: dict[str, object] = {
        "latest": now - config.followup_delay,
        "earliest": earliest,
        "after_at": after[0] if after else earliest,
        "after_id": after[1] if after else 0,
        "limit": limit,
    }
    if user_ids is not None:
        params["user_ids"] = list(user_ids)
    rows = (await db.execute(text(_DUE_EVENTS.format(source=source)), params)).all()
    found = []
    for row in rows:
        effective = effective_time(row.event_at, row.timezone)
        fresh = now - config.followup_window < effective
        if effective + config.followup_delay <= now and row.created_at < effective and fresh:
            found.append(
                DueEvent(row.id, row.user_id, row.event_at, row.timezone, row.next_checkin_at)
            )
    position = (rows[-1].event_at, rows[-1].id) if len(rows) == limit else None
    return found, position


async def schedule_new(sessions: async_sessionmaker[AsyncSession], *, now: datetime) -> int:
    """Give people with a check-in time and a known timezone but no next check-in (new
    people, or people who just told their timezone) their next one."""
    async with sessions.begin() as db:
        people = (await db.execute(_UNSCHEDULED, {"limit": 1000})).all()
        if people:
            await db.execute(
                _ADVANCE,
                {
                    "ids": [p.id for p in people],
                    "next_at": [next_checkin(now, p.timezone, p.checkin_time) for p in people],
                },
            )
    return len(people)


async def claim_checkins(
    sessions: async_sessionmaker[AsyncSession], *, now: datetime, config: SchedulerConfig
) -> tuple[list[Claim], int]:
    """Claim one batch of due people: advance their next check-in and write today's row
    (skipped as missed when it is older than the grace window), folding in due
    follow-ups; returns the pending claims and how many people were taken."""
    token = new_token()
    async with sessions.begin() as db:
        people = (await db.execute(_DUE_PEOPLE, {"now": now, "limit": config.batch_size})).all()
        if not people:
            return [], 0
        upcoming: dict[tuple[str, time | None], datetime | None] = {}  # shared by many
        for p in people:
            if not p.paused and (p.timezone, p.checkin_time) not in upcoming:
                upcoming[p.timezone, p.checkin_time] = next_checkin(now, p.timezone, p.checkin_time)
        rows = [_checkin_row(p.id, p.timezone, p.next_checkin_at, now, config) for p in people]
        pending = [r.user_id for r in rows if r.status == "pending"]
        events: list[DueEvent] = []
        if pending:
            events, _ = await due_events(
                db, now=now, config=config, user_ids=pending, limit=10 * len(pending)
            )
        result = await db.execute(
            _CLAIM,
            {
                "ids": [p.id for p in people],
                "next_at": [
                    None if p.paused else upcoming[p.timezone, p.checkin_time] for p in people
                ],
                **_columns(rows),
                "event_user_ids": [e.user_id for e in events],
                "event_ids": [e.memory_id for e in events],
                "event_keys": [followup_key(e.user_id, e.memory_id) for e in events],
                "lease_until": now + config.lease,
                "token": token,
                "now": now,
            },
        )
        inserted = result.all()
    for row in inserted:
        if row.status != "pending":
            metrics.record_outreach(row.kind, row.status, row.reason)
    claims = [
        Claim(r.id, r.user_id, r.kind, token, r.due_at) for r in inserted if r.status == "pending"
    ]
    return claims, len(people)


def _checkin_row(
    user_id: int, tz_name: str, due_at: datetime, now: datetime, config: SchedulerConfig
) -> _Row:
    """Today's check-in row; one missed by more than the grace window is skipped."""
    key = checkin_key(user_id, due_at, tz_name)
    if now - due_at > config.grace:
        return _Row(user_id, "checkin", key, due_at, status="skipped", reason="missed")
    return _Row(user_id, "checkin", key, due_at)


def _waits_for_checkin(event: DueEvent, now: datetime) -> bool:
    """The person's check-in is today: the follow-up goes into it."""
    upcoming = event.next_checkin_at
    return upcoming is not None and local_date(upcoming, event.timezone) == local_date(
        now, event.timezone
    )


async def claim_followups(
    sessions: async_sessionmaker[AsyncSession],
    *,
    now: datetime,
    config: SchedulerConfig,
    after: tuple[datetime, int] | None = None,
) -> tuple[list[Claim], tuple[datetime, int] | None]:
    """Claim one page of follow-ups due on their own (one message per person, each due
    event of theirs on the page folded into it); and where the next page starts."""
    token = new_token()
    async with sessions.begin() as db:
        events, after = await due_events(
            db, now=now, config=config, after=after, limit=config.batch_size
        )
        claims = await _claim_events(db, events, now=now, config=config, token=token)
    return claims, after


async def _claim_events(
    db: AsyncSession,
    events: Sequence[DueEvent],
    *,
    now: datetime,
    config: SchedulerConfig,
    token: str,
) -> list[Claim]:
    grouped: dict[int, list[DueEvent]] = defaultdict(list)
    for event in events:
        if not _waits_for_checkin(event, now):
            grouped[event.user_id].append(event)
    if not grouped:
        return []
    primaries = [
        _Row(u, "followup", followup_key(u, es[0].memory_id), now, memory_id=es[0].memory_id)
        for u, es in grouped.items()
    ]
    inserted = await _insert(db, primaries, now=now, token=token, lease_until=now + config.lease)
    won = {row.user_id: row.id for row in inserted}
    rest = [
        _Row(
            u,
            "followup",
            followup_key(u, e.memory_id),
            now,
            memory_id=e.memory_id,
            merged_into=won[u],
        )
        for u, es in grouped.items()
        if u in won
        for e in es[1:]
    ]
    await _insert(db, rest, now=now, token=token, lease_until=now)
    return [Claim(r.id, r.user_id, r.kind, token, r.due_at) for r in inserted]
