"""Erasing what a person asked to forget: the words behind a forgotten memory, and
everything about a person (`/forget all`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.tables import Base, Message, Session, User

HIDDEN = "forgotten"


async def _with_replies(
    db: AsyncSession, user_id: int, message_ids: Sequence[int]
) -> tuple[list[int], set[int]]:
    """The messages and the companion's reply right after each; and their sessions."""
    rows = (
        await db.execute(
            select(Message.id, Message.session_id).where(
                Message.user_id == user_id, Message.id.in_(message_ids)
            )
        )
    ).all()
    ids = [row[0] for row in rows]
    for message_id, session_id in rows:
        reply = await db.scalar(
            select(Message.id)
            .where(
                Message.user_id == user_id,
                Message.session_id == session_id,
                Message.id > message_id,
            )
            .order_by(Message.id)
            .limit(1)
        )
        reply_role = None
        if reply is not None:
            reply_role = await db.scalar(select(Message.role).where(Message.id == reply))
        if reply is not None and reply_role == "assistant":
            ids.append(reply)
    return ids, {row[1] for row in rows}


async def hide_sources(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, message_ids: Sequence[int]
) -> int:
    """Hide a forgotten memory's source messages (and the replies right after them) from
    prompts and recall, and drop the summaries that may repeat them."""
    if not message_ids:
        return 0
    async with sessions.begin() as db:
        hidden, session_ids = await _with_replies(db, user_id, message_ids)
        await db.execute(
            update(Message)
            .where(Message.user_id == user_id, Message.id.in_(hidden))
            .values(status=HIDDEN)
        )
        await db.execute(
            update(Session)
            .where(Session.user_id == user_id, Session.id.in_(session_ids))
            .values(summary="", summarized_through=None)
        )
        return len(hidden)


async def unhide_sources(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, message_ids: Sequence[int]
) -> None:
    """Undo `hide_sources` after a forgotten memory is restored."""
    if not message_ids:
        return
    async with sessions.begin() as db:
        hidden, _sessions = await _with_replies(db, user_id, message_ids)
        await db.execute(
            update(Message)
            .where(Message.user_id == user_id, Message.id.in_(hidden), Message.status == HIDDEN)
            .values(status="answered")
        )


def person_tables() -> list[str]:
    """Every table that holds rows of a person (by a `user_id` column)."""
    return sorted(t.name for t in Base.metadata.sorted_tables if "user_id" in t.c)


async def count_person_data(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int
) -> dict[str, int]:
    """How many rows of this person each table holds."""
    counts: dict[str, int] = {}
    async with sessions() as db:
        for name in person_tables():
            table = Base.metadata.tables[name]
            query = select(func.count()).select_from(table).where(table.c.user_id == user_id)
            counts[name] = int(await db.scalar(query) or 0)
    return counts


async def erase_person(sessions: async_sessionmaker[AsyncSession], *, user_id: int) -> None:
    """Delete the person and, by cascade, every row of theirs in every table."""
    async with sessions.begin() as db:
        for name in person_tables():
            table = Base.metadata.tables[name]
            await db.execute(delete(table).where(table.c.user_id == user_id))
        await db.execute(delete(User).where(User.id == user_id))
