"""The claim statements of the scheduler, set-based: people whose check-in is due (locked
with SKIP LOCKED), people with none scheduled yet, advancing their next check-in, the
remembered events whose follow-up may be due, and the outbox rows of a claim, written in
one statement each.

The scheduler decides (keys, times, what is missed, what folds into what) and runs these
inside one transaction it opens (`Database.begin()`); a row whose idempotency key
already exists is not written again and not returned, so a second process (or a second
run) finds nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncSession

_DUE_PEOPLE = text("""
SELECT id, timezone, checkin_time, paused, next_checkin_at, quiet_start, quiet_end FROM users
WHERE next_checkin_at <= :now
ORDER BY next_checkin_at
LIMIT :limit
FOR NO KEY UPDATE SKIP LOCKED
""")

_UNSCHEDULED = text("""
SELECT id, timezone, checkin_time, paused, next_checkin_at, quiet_start, quiet_end FROM users
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
                  WHERE o.user_id = m.user_id
                    AND o.idempotency_key = 'followup:' || m.user_id || ':' || m.id
                  OFFSET 0)
  AND NOT EXISTS (SELECT 1 FROM memories AS p JOIN outreach AS o ON o.memory_id = p.id
                  WHERE p.user_id = m.user_id AND o.user_id = m.user_id
                    AND p.superseded_by = m.id
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
class CheckinPerson:
    """A person as claiming their check-in sees them."""

    id: int
    timezone: str
    checkin_time: time | None
    paused: bool
    next_checkin_at: datetime | None
    quiet_start: time | None = None
    quiet_end: time | None = None


@dataclass(frozen=True, slots=True)
class EventCandidate:
    """A live remembered event in the follow-up window, not followed up yet."""

    memory_id: int
    user_id: int
    event_at: datetime
    created_at: datetime
    timezone: str
    next_checkin_at: datetime | None


@dataclass(frozen=True, slots=True)
class OutreachRow:
    """An outreach row to insert."""

    user_id: int
    kind: str
    key: str
    due_at: datetime
    status: str = "pending"
    reason: str | None = None
    memory_id: int | None = None
    merged_into: int | None = None


@dataclass(frozen=True, slots=True)
class InsertedOutreach:
    """An outreach row as inserted."""

    id: int
    user_id: int
    kind: str
    status: str
    reason: str | None
    due_at: datetime


@dataclass(frozen=True, slots=True)
class FoldedEvent:
    """A due follow-up folded into the person's check-in claimed with it."""

    user_id: int
    memory_id: int
    key: str


def _person(row: Row[Any]) -> CheckinPerson:
    return CheckinPerson(
        row.id,
        row.timezone,
        row.checkin_time,
        row.paused,
        row.next_checkin_at,
        row.quiet_start,
        row.quiet_end,
    )


async def lock_due_people(db: AsyncSession, *, now: datetime, limit: int) -> list[CheckinPerson]:
    """People whose next check-in has come, longest due first, locked for this
    transaction (people another process holds are skipped)."""
    rows = (await db.execute(_DUE_PEOPLE, {"now": now, "limit": limit})).all()
    return [_person(r) for r in rows]


async def lock_unscheduled_people(db: AsyncSession, *, limit: int) -> list[CheckinPerson]:
    """People with a check-in time and a known timezone but no next check-in, locked."""
    rows = (await db.execute(_UNSCHEDULED, {"limit": limit})).all()
    return [_person(r) for r in rows]


async def set_next_checkins(
    db: AsyncSession, ids: Sequence[int], next_at: Sequence[datetime | None]
) -> None:
    """Each person's next check-in (None: none scheduled), in one statement."""
    await db.execute(_ADVANCE, {"ids": list(ids), "next_at": list(next_at)})


async def event_candidates(
    db: AsyncSession,
    *,
    latest: datetime,
    earliest: datetime,
    after: tuple[datetime, int],
    limit: int,
    user_ids: Sequence[int] | None = None,
) -> list[EventCandidate]:
    """Live events between `earliest` and `latest` past the keyset position `after`
    (everyone's, or only `user_ids`'), of people whose timezone is known, with no
    follow-up row yet (nor one for an earlier version of the event); oldest first."""
    source = _THESE_PEOPLE if user_ids is not None else _EVERYONE
    params: dict[str, object] = {
        "latest": latest,
        "earliest": earliest,
        "after_at": after[0],
        "after_id": after[1],
        "limit": limit,
    }
    if user_ids is not None:
        params["user_ids"] = list(user_ids)
    rows = (await db.execute(text(_DUE_EVENTS.format(source=source)), params)).all()
    return [
        EventCandidate(r.id, r.user_id, r.event_at, r.created_at, r.timezone, r.next_checkin_at)
        for r in rows
    ]


def _columns(rows: Sequence[OutreachRow]) -> dict[str, list[object]]:
    """The columns every outreach insert takes, as arrays (one element per row)."""
    return {
        "user_ids": [r.user_id for r in rows],
        "keys": [r.key for r in rows],
        "statuses": [r.status for r in rows],
        "reasons": [r.reason for r in rows],
        "due": [r.due_at for r in rows],
    }


def _inserted(rows: Sequence[Row[Any]]) -> list[InsertedOutreach]:
    return [InsertedOutreach(r.id, r.user_id, r.kind, r.status, r.reason, r.due_at) for r in rows]


async def claim_checkin_rows(
    db: AsyncSession,
    people: Sequence[tuple[int, datetime | None]],
    rows: Sequence[OutreachRow],
    folded: Sequence[FoldedEvent],
    *,
    now: datetime,
    token: str,
    lease_until: datetime,
) -> list[InsertedOutreach]:
    """The claim's writes in one statement: each of `people` (id, next check-in) advanced,
    the check-in `rows` written (pending ones leased to `token`), and the `folded`
    follow-ups merged into the pending check-ins actually written; returns those."""
    result = await db.execute(
        _CLAIM,
        {
            "ids": [user_id for user_id, _ in people],
            "next_at": [next_at for _, next_at in people],
            **_columns(rows),
            "event_user_ids": [f.user_id for f in folded],
            "event_ids": [f.memory_id for f in folded],
            "event_keys": [f.key for f in folded],
            "lease_until": lease_until,
            "token": token,
            "now": now,
        },
    )
    return _inserted(result.all())


async def insert_outreach(
    db: AsyncSession,
    rows: Sequence[OutreachRow],
    *,
    now: datetime,
    token: str,
    lease_until: datetime,
) -> list[InsertedOutreach]:
    """Write outreach rows (pending primary rows leased to `token`); returns those written."""
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
    return _inserted((await db.execute(_INSERT, params)).all())
