"""Where a memory came from: the person's messages behind it, whatever made it.

Extraction records the messages it read; a command that makes or changes a memory
(`/remember`, `/edit`) stores its own text as a message of the person's with status
`command`, and the chat model's `remember` tool records the turn it was called in.
Forgetting the memory then hides exactly those words (see `memory.care.forgetting`).

A `command` message is kept so that nothing the person wrote is lost and so the memory
points at it, but it is never read as conversation: not a turn in a prompt, not
recalled, not summarised, not extracted, not in the diary. Its words reach a prompt
only as the memory it made, so forgetting that memory removes them; the trash purge
erases its text with the memory.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.statuses import COMMAND
from memory.store.tables import Message
from memory.store.tables import Session as SessionRow

TURN_STATUSES = ("stored", "unanswered")
"""A person's messages still waiting for the reply being written."""


async def record_command(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    platform: str,
    chat_id: str | None,
    text: str,
    now: datetime,
) -> int:
    """Store a command's text as the person's message (status `command`) and return its
    id. It goes into the person's latest session, which it neither opens, closes nor
    touches (a command is not conversation); a person with no session yet gets a closed,
    empty one to hold it."""
    async with sessions.begin() as db:
        session_id = await db.scalar(
            select(SessionRow.id)
            .where(SessionRow.user_id == user_id)
            .order_by(SessionRow.id.desc())
            .limit(1)
        )
        if session_id is None:
            session_id = await _closed_session(db, user_id=user_id, now=now)
        message_id = await db.scalar(
            insert(Message)
            .values(
                user_id=user_id,
                session_id=session_id,
                role="user",
                content=text,
                platform=platform,
                chat_id=chat_id,
                status=COMMAND,
                created_at=now,
            )
            .returning(Message.id)
        )
    return int(message_id or 0)


async def _closed_session(db: AsyncSession, *, user_id: int, now: datetime) -> int:
    session_id = await db.scalar(
        insert(SessionRow)
        .values(user_id=user_id, started_at=now, last_message_at=now, closed_at=now)
        .returning(SessionRow.id)
    )
    return int(session_id or 0)


async def turn_message_ids(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, message_id: int
) -> list[int]:
    """The person's messages this turn answers: `message_id` and the earlier ones of its
    session still waiting for a reply (a burst is answered as one turn)."""
    async with sessions() as db:
        session_id = select(Message.session_id).where(
            Message.id == message_id, Message.user_id == user_id
        )
        waiting = await db.scalars(
            select(Message.id).where(
                Message.user_id == user_id,
                Message.session_id == session_id.scalar_subquery(),
                Message.role == "user",
                Message.id < message_id,
                Message.status.in_(TURN_STATUSES),
            )
        )
        return sorted({*waiting, message_id})


async def turn_words(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, message_ids: list[int]
) -> str:
    """What the person wrote in these messages of theirs (a turn), oldest first: what a
    tool call is checked against when it claims the person asked for it."""
    if not message_ids:
        return ""
    async with sessions() as db:
        texts = await db.scalars(
            select(Message.content)
            .where(
                Message.user_id == user_id,
                Message.id.in_(message_ids),
                Message.role == "user",
            )
            .order_by(Message.id)
        )
        return "\n".join(texts)
