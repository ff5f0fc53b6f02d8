"""Conversation sessions: closing idle ones and their running summaries, in PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update

from memory.store.log_access import LogAccess
from memory.store.summary_units import summary_vectors
from memory.store.tables import Session as SessionRow


class SqlSessions(LogAccess):
    """Sessions: everyone's idle ones closed in one statement; one person's summary."""

    async def close_idle_sessions(
        self, *, now: datetime, idle_gap: timedelta, limit: int = 500
    ) -> int:
        """Close everyone's sessions idle for longer than the gap (set-based); they are then
        due for extraction. Returns how many were closed."""
        idle = (
            select(SessionRow.id)
            .where(SessionRow.closed_at.is_(None), SessionRow.last_message_at < now - idle_gap)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        async with self._sessions.begin() as db:
            result = await db.execute(
                update(SessionRow)
                .where(SessionRow.id.in_(idle))
                .values(closed_at=SessionRow.last_message_at, extraction_due=True)
            )
        return int(getattr(result, "rowcount", 0) or 0)

    async def save_summary(
        self, *, user_id: int, session_id: int, summary: str, through_id: int
    ) -> None:
        """Replace the running summary, now covering messages up to `through_id` (and its
        sentences' vectors, with the store's embedder)."""
        vectors = await summary_vectors(self._embedder, summary)
        async with self._sessions.begin() as db:
            await db.execute(
                update(SessionRow)
                .where(SessionRow.id == session_id, SessionRow.user_id == user_id)
                .values(summary=summary, summarized_through=through_id, summary_vectors=vectors)
            )
