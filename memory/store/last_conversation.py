"""The person's latest conversation as a proactive message sees it: its running summary
and its last messages, read in one query."""

from __future__ import annotations

from sqlalchemy import select, true
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.log_statements import stored_messages
from memory.store.records import StoredMessage
from memory.store.tables import Message
from memory.store.tables import Session as SessionRow


async def latest_conversation(
    sessions: async_sessionmaker[AsyncSession], user_id: int, *, last: int
) -> tuple[str, list[StoredMessage]]:
    """The summary and the `last` messages (oldest first, hidden ones included) of the
    person's latest session; ('', []) when they have none."""
    latest = (
        select(SessionRow.id, SessionRow.summary)
        .where(SessionRow.user_id == user_id, SessionRow.import_id.is_(None))
        .order_by(SessionRow.id.desc())
        .limit(1)
        .subquery()
    )
    recent = (
        stored_messages()
        .where(Message.user_id == user_id, Message.session_id == latest.c.id)
        .order_by(Message.id.desc())
        .limit(last)
        .lateral()
    )
    query = select(latest.c.summary, recent).select_from(latest.outerjoin(recent, true()))
    async with sessions() as db:
        rows = (await db.execute(query)).all()
    if not rows:
        return "", []
    messages = [
        StoredMessage(r.id, r.user_id, r.session_id, r.role, r.content, r.created_at, r.status)
        for r in reversed(rows)
        if r.id is not None
    ]
    return rows[0].summary, messages
