"""Claiming work, set-based: due check-ins (people locked with SKIP LOCKED, their next
check-in advanced and the outbox row written in one transaction), the follow-ups folded
into them or due on their own, and people who have no check-in scheduled yet. The
statements are `memory.store.claims`'; what to write (keys, times, folds) is decided here.

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

from bot import metrics
from bot.timing import next_checkin, spread_checkin
from memory.local_time import local_date, zone_of
from memory.store.claims import (
    CheckinPerson,
    FoldedEvent,
    OutreachRow,
    claim_checkin_rows,
    event_candidates,
    insert_outreach,
    lock_due_people,
    lock_unscheduled_people,
    set_next_checkins,
)
from memory.store.database import Database, DbSession
from memory.store.outbox import Claim, new_token
from scheduler.deps import SchedulerConfig


@dataclass(frozen=True, slots=True)
class DueEvent:
    """A remembered event whose follow-up is due now."""

    memory_id: int
    user_id: int
    event_at: datetime
    timezone: str
    next_checkin_at: datetime | None


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


async def due_events(
    db: DbSession,
    *,
    now: datetime,
    config: SchedulerConfig,
    user_ids: Sequence[int] | None = None,
    after: tuple[datetime, int] | None = None,
    limit: int = 500,
) -> tuple[list[DueEvent], tuple[datetime, int] | None]:
    """Events whose follow-up is due and not yet claimed, mentioned before they happened;
    and the keyset position to continue from (None when there are no more)."""
    earliest = now - config.followup_window - timedelta(days=1)
    rows = await event_candidates(
        db,
        latest=now - config.followup_delay,
        earliest=earliest,
        after=after or (earliest, 0),
        limit=limit,
        user_ids=user_ids,
    )
    found = []
    for row in rows:
        effective = effective_time(row.event_at, row.timezone)
        fresh = now - config.followup_window < effective
        if effective + config.followup_delay <= now and row.created_at < effective and fresh:
            found.append(
                DueEvent(
                    row.memory_id, row.user_id, row.event_at, row.timezone, row.next_checkin_at
                )
            )
    position = (rows[-1].event_at, rows[-1].memory_id) if len(rows) == limit else None
    return found, position


def checkin_at(person: CheckinPerson, spread: timedelta) -> time | None:
    """The person's check-in time moved by their stable offset inside `spread`."""
    if person.checkin_time is None:
        return None
    return spread_checkin(
        person.checkin_time, person.id, spread, person.quiet_start, person.quiet_end
    )


async def schedule_new(
    sessions: Database, *, now: datetime, spread: timedelta = timedelta(0)
) -> int:
    """Give people with a check-in time and a known timezone but no next check-in (new
    people, or people who just told their timezone) their next one."""
    async with sessions.begin() as db:
        people = await lock_unscheduled_people(db, limit=1000)
        if people:
            await set_next_checkins(
                db,
                [p.id for p in people],
                [next_checkin(now, p.timezone, checkin_at(p, spread)) for p in people],
            )
    return len(people)


async def claim_checkins(
    sessions: Database, *, now: datetime, config: SchedulerConfig, limit: int | None = None
) -> tuple[list[Claim], int]:
    """Claim one batch of due people (`limit`, or the configured batch size): advance
    their next check-in and write today's row (skipped as missed when it is older than the
    grace window), folding in due follow-ups; returns the pending claims and how many
    people were taken."""
    token = new_token()
    async with sessions.begin() as db:
        people = await lock_due_people(db, now=now, limit=limit or config.batch_size)
        if not people:
            return [], 0
        upcoming: dict[tuple[str, time | None], datetime | None] = {}  # shared by many
        at = {p.id: checkin_at(p, config.spread) for p in people}
        for p in people:
            if not p.paused and (p.timezone, at[p.id]) not in upcoming:
                upcoming[p.timezone, at[p.id]] = next_checkin(now, p.timezone, at[p.id])
        rows = [_checkin_row(p, now, config) for p in people]
        pending = [r.user_id for r in rows if r.status == "pending"]
        events: list[DueEvent] = []
        if pending:
            events, _ = await due_events(
                db, now=now, config=config, user_ids=pending, limit=10 * len(pending)
            )
        inserted = await claim_checkin_rows(
            db,
            [
                (p.id, None if p.paused else _after(p, upcoming[p.timezone, at[p.id]], at[p.id]))
                for p in people
            ],
            rows,
            [
                FoldedEvent(e.user_id, e.memory_id, followup_key(e.user_id, e.memory_id))
                for e in events
            ],
            now=now,
            token=token,
            lease_until=now + config.lease,
        )
    for row in inserted:
        if row.status != "pending":
            metrics.record_outreach(row.kind, row.status, row.reason)
    claims = [
        Claim(r.id, r.user_id, r.kind, token, r.due_at) for r in inserted if r.status == "pending"
    ]
    return claims, len(people)


def _after(person: CheckinPerson, upcoming: datetime | None, at: time | None) -> datetime | None:
    """The next check-in after the one claimed: on a later local date (one a day; the
    spread may put today's own time still ahead, e.g. after the time was changed)."""
    due = person.next_checkin_at
    if upcoming is None or due is None:
        return upcoming
    if local_date(upcoming, person.timezone) > local_date(due, person.timezone):
        return upcoming
    return next_checkin(upcoming, person.timezone, at)


def _checkin_row(person: CheckinPerson, now: datetime, config: SchedulerConfig) -> OutreachRow:
    """Today's check-in row; one missed by more than the grace window is skipped."""
    due_at = person.next_checkin_at or now  # locked because it is due: never None
    key = checkin_key(person.id, due_at, person.timezone)
    if now - due_at > config.grace:
        return OutreachRow(person.id, "checkin", key, due_at, status="skipped", reason="missed")
    return OutreachRow(person.id, "checkin", key, due_at)


def _waits_for_checkin(event: DueEvent, now: datetime) -> bool:
    """The person's check-in is today: the follow-up goes into it."""
    upcoming = event.next_checkin_at
    return upcoming is not None and local_date(upcoming, event.timezone) == local_date(
        now, event.timezone
    )


async def claim_followups(
    sessions: Database,
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
    db: DbSession,
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
        OutreachRow(u, "followup", followup_key(u, es[0].memory_id), now, memory_id=es[0].memory_id)
        for u, es in grouped.items()
    ]
    inserted = await insert_outreach(
        db, primaries, now=now, token=token, lease_until=now + config.lease
    )
    won = {row.user_id: row.id for row in inserted}
    rest = [
        OutreachRow(
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
    await insert_outreach(db, rest, now=now, token=token, lease_until=now)
    return [Claim(r.id, r.user_id, r.kind, token, r.due_at) for r in inserted]
