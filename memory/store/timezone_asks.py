"""Claiming the people due to be asked for their timezone a second time, on their own:
still unknown, asked once at least `min_since_ask` ago, not paused, reachable, and now is
within `window` after the moment a day past their last message (the hour of day they were
last active). The claim marks them asked twice in the same statement, so two processes
never ask the same person twice."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.tables import Message, User

AFTER_LAST_ACTIVE = timedelta(hours=24)
MIN_SINCE_ASK = timedelta(hours=20)
WINDOW = timedelta(hours=1)  # past this after the due moment the ask is skipped
LIMIT = 500


async def claim_second_asks(
    sessions: async_sessionmaker[AsyncSession],
    *,
    now: datetime,
    limit: int = LIMIT,
) -> list[int]:
    """The ids of people due a second timezone question now, already marked as asked
    twice (`timezone_asks = 2`, `timezone_asked_at = now`)."""
    last_active = (
        select(Message.created_at)
        .where(Message.user_id == User.id, Message.role == "user", Message.import_id.is_(None))
        .order_by(Message.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    due = (
        select(User.id)
        .where(
            User.timezone_known.is_(False),
            User.timezone_asks == 1,
            User.paused.is_(False),
            User.reachable.is_(True),
            User.timezone_asked_at <= now - MIN_SINCE_ASK,
            last_active.between(now - AFTER_LAST_ACTIVE - WINDOW, now - AFTER_LAST_ACTIVE),
        )
        .order_by(User.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .cte("due")
    )
    claim = (
        update(User)
        .where(User.id.in_(select(due.c.id)))
        .values(timezone_asks=2, timezone_asked_at=now)
        .returning(User.id)
    )
    async with sessions() as db, db.begin():
        return list(await db.scalars(claim))
