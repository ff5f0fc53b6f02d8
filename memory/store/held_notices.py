"""Notices held for a person's allowed window: written when the companion would speak on
its own at the wrong time, dropped when stale, and claimed once when the window opens.

    held ──▶ sending ──▶ sent | dropped      (deliver between the two)
      └──▶ dropped (stale, nothing left to say)

`sending` is committed before delivery and never taken again, so a crash mid-send loses
a notice rather than sending it twice; rows are claimed with SKIP LOCKED, so any number
of processes release each notice at most once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any

from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.items import MemoryItem
from memory.store.memory_batch import to_item
from memory.store.tables import HeldNotice, Memory, User

ButtonRows = tuple[tuple[tuple[str, str], ...], ...]
"""Buttons as (label, action) pairs, row by row."""


@dataclass(frozen=True, slots=True)
class Window:
    """What decides whether a person may be written to now."""

    user_id: int
    timezone: str
    timezone_known: bool
    paused: bool
    quiet_start: time | None
    quiet_end: time | None


@dataclass(frozen=True, slots=True)
class Held:
    """One held notice: the memories it is about, or a message as it was."""

    id: int
    user_id: int
    memory_ids: tuple[int, ...]
    text: str
    buttons: ButtonRows
    created_at: datetime


_CLAIM = text("""
SELECT h.id, h.user_id, h.memory_ids, h.text, h.buttons, h.created_at,
       u.timezone, u.timezone_known, u.paused, u.quiet_start, u.quiet_end
FROM held_notices AS h JOIN users AS u ON u.id = h.user_id
WHERE h.status = 'held' AND (h.created_at, h.id) > (:after_at, :after_id)
  AND u.timezone_known AND NOT u.paused
ORDER BY h.created_at, h.id
LIMIT :limit
FOR UPDATE OF h SKIP LOCKED
""")


def _window(row: Any) -> Window:
    return Window(
        row.user_id, row.timezone, row.timezone_known, row.paused, row.quiet_start, row.quiet_end
    )


async def window_of(sessions: async_sessionmaker[AsyncSession], user_id: int) -> Window | None:
    """The person's window as stored now (None when they no longer exist)."""
    async with sessions() as db:
        row = (
            await db.execute(
                select(
                    User.id.label("user_id"),
                    User.timezone,
                    User.timezone_known,
                    User.paused,
                    User.quiet_start,
                    User.quiet_end,
                ).where(User.id == user_id)
            )
        ).first()
    return _window(row) if row is not None else None


async def hold(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    now: datetime,
    memory_ids: Sequence[int] = (),
    text_: str = "",
    buttons: ButtonRows = (),
) -> int:
    """Keep a notice until the person's window opens; returns its id."""
    async with sessions.begin() as db:
        held_id = await db.scalar(
            insert(HeldNotice)
            .values(
                user_id=user_id,
                memory_ids=list(memory_ids),
                text=text_,
                buttons=[[list(b) for b in row] for row in buttons],
                created_at=now,
            )
            .returning(HeldNotice.id)
        )
    return int(held_id or 0)


async def drop_stale(sessions: async_sessionmaker[AsyncSession], *, before: datetime) -> int:
    """Drop every held notice made before `before`; how many."""
    async with sessions.begin() as db:
        result = await db.execute(
            update(HeldNotice)
            .where(HeldNotice.status == "held", HeldNotice.created_at < before)
            .values(status="dropped", reason="stale")
        )
    return int(getattr(result, "rowcount", 0) or 0)


async def claim_open(
    sessions: async_sessionmaker[AsyncSession],
    *,
    is_open: Callable[[Window], bool],
    after: tuple[datetime, int] | None,
    limit: int,
) -> tuple[list[tuple[Window, list[Held]]], tuple[datetime, int] | None]:
    """One page of held notices of people whose window `is_open`, moved to `sending` and
    grouped by person (oldest first); and where the next page starts (None at the end).
    Rows another process holds are skipped; rows of people still outside their window
    stay held."""
    start = after or (datetime(1970, 1, 1, tzinfo=UTC), 0)
    params = {"after_at": start[0], "after_id": start[1], "limit": limit}
    groups: dict[int, tuple[Window, list[Held]]] = {}
    async with sessions.begin() as db:
        rows = (await db.execute(_CLAIM, params)).all()
        for row in rows:
            window = _window(row)
            if not is_open(window):
                continue
            held = Held(
                row.id,
                row.user_id,
                tuple(row.memory_ids),
                row.text,
                tuple(tuple((str(b[0]), str(b[1])) for b in r) for r in row.buttons),
                row.created_at,
            )
            groups.setdefault(row.user_id, (window, []))[1].append(held)
        taken = [h.id for _, hs in groups.values() for h in hs]
        if taken:
            await db.execute(
                update(HeldNotice).where(HeldNotice.id.in_(taken)).values(status="sending")
            )
    position = (rows[-1].created_at, rows[-1].id) if len(rows) == limit else None
    return list(groups.values()), position


async def close(
    sessions: async_sessionmaker[AsyncSession],
    ids: Sequence[int],
    *,
    status: str,
    now: datetime,
    reason: str | None = None,
) -> None:
    """Mark claimed notices sent or dropped."""
    if not ids:
        return
    async with sessions.begin() as db:
        await db.execute(
            update(HeldNotice)
            .where(HeldNotice.id.in_(list(ids)), HeldNotice.status == "sending")
            .values(status=status, reason=reason, released_at=now)
        )


async def live_items(
    sessions: async_sessionmaker[AsyncSession], user_id: int, memory_ids: Sequence[int]
) -> list[MemoryItem]:
    """Those of the memories that are still live (not undone, forgotten or replaced), in
    the order given."""
    if not memory_ids:
        return []
    async with sessions() as db:
        rows = (
            await db.scalars(
                select(Memory).where(
                    Memory.user_id == user_id,
                    Memory.id.in_(list(memory_ids)),
                    Memory.valid_until.is_(None),
                    Memory.status.in_(("active", "dying")),
                )
            )
        ).all()
    found = {row.id: to_item(row) for row in rows}
    return [found[i] for i in dict.fromkeys(memory_ids) if i in found]
