"""The companion's diary: one entry per person per local day (a few lines and notes to
self), the day's material it is written from, and the notes injected the next day.

An entry is withdrawn once any message it was written from is hidden (the person asked
to forget something in it); notes to self are also held back when anything was
forgotten after they were written, so forgotten content never reaches a later prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import Exists, Select, and_, bindparam, exists, func, select
from sqlalchemy.dialects.postgresql import JSONB, aggregate_order_by, insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.log_statements import stored_messages
from memory.store.records import StoredMessage
from memory.store.statuses import HIDDEN, UNSHOWN_STATUSES
from memory.store.tables import DiaryEntry, Memory, Message

MAX_DAY_MESSAGES = 300


@dataclass(frozen=True, slots=True)
class DiaryRecord:
    """One diary entry; `withdrawn` when something in it was since forgotten."""

    user_id: int
    local_date: date
    lines: tuple[str, ...]
    notes_to_self: tuple[str, ...]
    created_at: datetime
    withdrawn: bool = False


def _tainted() -> Exists:
    """An entry one of whose source messages is hidden now."""
    return exists().where(
        Message.user_id == DiaryEntry.user_id,
        Message.id == DiaryEntry.source_message_ids.any_(),
        Message.status == HIDDEN,
    )


async def save_entry(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    local_date: date,
    lines: Sequence[str],
    notes_to_self: Sequence[str],
    source_message_ids: Sequence[int],
    now: datetime,
) -> bool:
    """Store the entry for that day; False when one exists already (written once)."""
    async with sessions.begin() as db:
        inserted = await db.scalar(
            insert(DiaryEntry)
            .values(
                user_id=user_id,
                local_date=local_date,
                lines=list(lines),
                notes_to_self=list(notes_to_self),
                source_message_ids=sorted(set(source_message_ids)),
                created_at=now,
            )
            .on_conflict_do_nothing(constraint="uq_diary_entries_user_date")
            .returning(DiaryEntry.id)
        )
    return inserted is not None


async def recent_entries(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, limit: int = 3
) -> list[DiaryRecord]:
    """The person's latest entries, newest first."""
    query = (
        select(DiaryEntry, _tainted().label("tainted"))
        .where(DiaryEntry.user_id == user_id)
        .order_by(DiaryEntry.local_date.desc())
        .limit(limit)
    )
    async with sessions() as db:
        rows = (await db.execute(query)).all()
    return [
        DiaryRecord(
            user_id=row.user_id,
            local_date=row.local_date,
            lines=tuple(row.lines),
            notes_to_self=tuple(row.notes_to_self),
            created_at=row.created_at,
            withdrawn=bool(tainted),
        )
        for row, tainted in rows
    ]


@functools.cache
def notes_statement() -> Select[list[str]]:
    """Last night's notes to self: the entry of the day before the person's local today
    (bound as `uid` and `yesterday`, see `notes_params`); no row when anything was
    forgotten after they were written. Built once: building it is dearer than running it."""
    forgotten_since = exists().where(
        Memory.user_id == DiaryEntry.user_id,
        Memory.status == "forgotten",
        Memory.forgotten_at >= DiaryEntry.created_at,
    )
    return select(DiaryEntry.notes_to_self).where(
        DiaryEntry.user_id == bindparam("uid"),
        DiaryEntry.local_date == bindparam("yesterday"),
        ~forgotten_since,
        ~_tainted(),
    )


def notes_params(user_id: int, today: date) -> dict[str, object]:
    """The parameters of `notes_statement` for the person's local `today`."""
    return {"uid": user_id, "yesterday": today - timedelta(days=1)}


def week_params(user_id: int, today: date) -> dict[str, object]:
    """The parameters of `week_statement` (a superset of `notes_params`)."""
    return notes_params(user_id, today) | {"week_from": today - timedelta(days=DIARY_DAYS)}


DIARY_DAYS = 7
"""How many days of diary lines a conversation's prompt carries (the days before today)."""


@functools.cache
def week_statement() -> Any:
    """The diary's lines of the `DIARY_DAYS` days before the person's local today, oldest
    first, as a JSON array of [local date, [lines]] (bound: those of `week_params`); an
    entry is left out when anything was forgotten after it was written."""
    forgotten_since = exists().where(
        Memory.user_id == DiaryEntry.user_id,
        Memory.status == "forgotten",
        Memory.forgotten_at >= DiaryEntry.created_at,
    )
    pair = func.jsonb_build_array(DiaryEntry.local_date, DiaryEntry.lines)
    return (
        select(func.jsonb_agg(aggregate_order_by(pair, DiaryEntry.local_date), type_=JSONB))
        .where(
            DiaryEntry.user_id == bindparam("uid"),
            DiaryEntry.local_date.between(bindparam("week_from"), bindparam("yesterday")),
            func.cardinality(DiaryEntry.lines) > 0,
            ~forgotten_since,
            ~_tainted(),
        )
        .scalar_subquery()
    )


def week_lines(raw: object) -> tuple[tuple[date, str], ...]:
    """The rows of `week_statement` as (local date, line) pairs, oldest first."""
    pairs: list[tuple[date, str]] = []
    for day, lines in raw if isinstance(raw, list) else ():
        when = date.fromisoformat(str(day))
        pairs.extend((when, str(line)) for line in lines)
    return tuple(pairs)


async def notes_to_self(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, today: date
) -> tuple[str, ...]:
    """The notes of `notes_statement`, as a tuple (empty when there are none)."""
    async with sessions() as db:
        notes = await db.scalar(notes_statement(), notes_params(user_id, today))
    return tuple(notes or ())


async def day_messages(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    start: datetime,
    end: datetime,
    limit: int = MAX_DAY_MESSAGES,
) -> list[StoredMessage]:
    """The visible messages of both sides in [start, end), oldest first (the newest
    `limit`); hidden, apology and too-long messages never appear."""
    query = (
        stored_messages()
        .where(
            and_(
                Message.user_id == user_id,
                Message.created_at >= start,
                Message.created_at < end,
                Message.status.not_in(UNSHOWN_STATUSES),
                Message.import_id.is_(None),  # an imported old chat is not that day's talk
            )
        )
        .order_by(Message.id.desc())
        .limit(limit)
    )
    async with sessions() as db:
        rows = (await db.execute(query)).all()
    return [StoredMessage(*row) for row in reversed(rows)]
