"""Joining two people into one, inside the caller's transaction (`memory.care.linking`).

The older person stays, with their settings (a timezone only the other chose is taken
over: one never chosen is no setting); every row of the other moves to them: messages
and sessions as they are (each message keeps its platform), memories with short ids
after the keeper's own, their history with them, diary entries of the same day joined
into one, outbox keys renamed so a check-in already sent today still counts as today's.
The other's buttons and unused link codes are void (their short ids and owner changed),
and the other person's row is deleted last.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from memory.care.erasure import person_tables
from memory.store.tables import Base, ButtonAction, Identity, LinkCode, User
from memory.store.tables import Session as SessionRow

SETTINGS = (
    "timezone",
    "timezone_known",
    "checkin_time",
    "quiet_start",
    "quiet_end",
    "paused",
    "memory_notices",
)
"""The settings a person may take from the account that was joined into the older one."""

_MOVE_MEMORIES = text("""
WITH k AS (SELECT memory_seq, session_seq FROM users WHERE id = :keeper),
o AS (SELECT session_seq FROM users WHERE id = :other),
moved AS (
    SELECT id, row_number() OVER (ORDER BY short_id) AS n FROM memories WHERE user_id = :other
)
UPDATE memories AS m
SET user_id = :keeper, short_id = k.memory_seq + moved.n,
    recall_seq = m.recall_seq + k.session_seq - o.session_seq
FROM moved, k, o
WHERE m.id = moved.id
RETURNING m.id
""")

_MOVE_EVENTS = text("""
UPDATE memory_events AS e
SET user_id = :keeper,
    details = CASE WHEN m.id IS NULL THEN e.details
                   ELSE e.details || jsonb_build_object('short_id', m.short_id) END
FROM memory_events AS x LEFT JOIN memories AS m ON m.id = x.memory_id
WHERE e.id = x.id AND e.user_id = :other
""")

_JOIN_DIARY_DAYS = text("""
WITH joined AS (
    UPDATE diary_entries AS k
    SET lines = k.lines || o.lines, notes_to_self = k.notes_to_self || o.notes_to_self,
        source_message_ids = k.source_message_ids || o.source_message_ids
    FROM diary_entries AS o
    WHERE k.user_id = :keeper AND o.user_id = :other AND o.local_date = k.local_date
    RETURNING o.id
)
DELETE FROM diary_entries WHERE id IN (SELECT id FROM joined)
""")

# `checkin:<other>:<date>` becomes `checkin:<keeper>:<date>` (and so for follow-ups)
# unless the keeper has that key already: one check-in a day for the joined person.
_RENAME_OUTREACH = text("""
UPDATE outreach AS o
SET idempotency_key = regexp_replace(o.idempotency_key, :pattern, :replacement)
WHERE o.user_id = :other
  AND NOT EXISTS (
    SELECT 1 FROM outreach AS x
    WHERE x.idempotency_key = regexp_replace(o.idempotency_key, :pattern, :replacement))
""")


@dataclass(frozen=True, slots=True)
class Joined:
    """What a join did: the memories that moved, and the other person's settings (as
    JSON-ready values) for the person to take instead of the keeper's."""

    keeper_id: int
    moved_memory_ids: tuple[int, ...]
    moved_from: int
    """The first short id the moved memories got (the keeper's own are below it)."""
    other_settings: dict[str, Any]


async def lock_people(db: AsyncSession, ids: list[int]) -> list[User]:
    """The people's rows, oldest first, locked after all their accounts: the inbound path
    locks an account and then writes under its person, so taking them in the same order
    keeps a message arriving meanwhile from deadlocking with the join (it waits)."""
    await db.execute(
        select(Identity.id).where(Identity.user_id.in_(ids)).order_by(Identity.id).with_for_update()
    )
    rows = list(
        await db.scalars(select(User).where(User.id.in_(ids)).order_by(User.id).with_for_update())
    )
    return sorted(rows, key=lambda row: (row.created_at, row.id))


def settings_of(row: User) -> dict[str, Any]:
    """A person's settings as JSON-ready values (times as 'HH:MM', or None)."""
    values: dict[str, Any] = {}
    for name in SETTINGS:
        value = getattr(row, name)
        values[name] = value.strftime("%H:%M") if hasattr(value, "strftime") else value
    return values


async def join_people(db: AsyncSession, *, keeper: User, other: User, now: datetime) -> Joined:
    """Move every row of `other` to `keeper` and delete `other` (both locked by the
    caller); the keeper's settings stay."""
    ids = {"keeper": keeper.id, "other": other.id}
    moved_from = keeper.memory_seq + 1
    moved = tuple(await db.scalars(_MOVE_MEMORIES, ids))
    await db.execute(
        update(User)
        .where(User.id == keeper.id)
        .values(memory_seq=User.memory_seq + len(moved))
        .execution_options(synchronize_session=False)
    )
    await db.execute(_MOVE_EVENTS, ids)
    await db.execute(_JOIN_DIARY_DAYS, ids)
    await db.execute(
        _RENAME_OUTREACH,
        {
            "other": other.id,
            "pattern": f"^([a-z]+):{other.id}:",
            "replacement": f"\\1:{keeper.id}:",
        },
    )
    # Their meaning was the other person's (short ids, owner); used codes move along.
    await db.execute(delete(ButtonAction).where(ButtonAction.user_id == other.id))
    await db.execute(
        delete(LinkCode).where(LinkCode.user_id == other.id, LinkCode.used_at.is_(None))
    )
    await db.execute(
        update(SessionRow)
        .where(SessionRow.user_id == other.id, SessionRow.closed_at.is_(None))
        .values(closed_at=SessionRow.last_message_at, extraction_due=True)
    )
    await _move_identities(db, keeper_id=keeper.id, other_id=other.id)
    for name in person_tables():  # whatever is left, whichever table holds it
        table = Base.metadata.tables[name]
        await db.execute(update(table).where(table.c.user_id == other.id).values(user_id=keeper.id))
    snapshot = settings_of(other)
    if other.timezone_known and not keeper.timezone_known:  # not chosen is not a setting
        await db.execute(
            update(User)
            .where(User.id == keeper.id)
            .values(timezone=other.timezone, timezone_known=True)
            .execution_options(synchronize_session=False)
        )
    await db.execute(delete(User).where(User.id == other.id))
    return Joined(keeper.id, moved, moved_from, snapshot)


async def _move_identities(db: AsyncSession, *, keeper_id: int, other_id: int) -> None:
    """The other's accounts join the keeper's; check-ins keep going to the keeper's
    account they went to (its newest one) until the person picks."""
    chosen = (
        select(Identity.id)
        .where(Identity.user_id == keeper_id)
        .order_by(Identity.outreach.desc(), Identity.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    await db.execute(
        update(Identity)
        .where(Identity.user_id == keeper_id)
        .values(outreach=Identity.id == chosen)
        .execution_options(synchronize_session=False)
    )
    await db.execute(
        update(Identity)
        .where(Identity.user_id == other_id)
        .values(user_id=keeper_id, outreach=False)
        .execution_options(synchronize_session=False)
    )
