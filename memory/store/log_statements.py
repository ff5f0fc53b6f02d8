"""Rows and statements of the conversation log: how rows become plain records, and the
statements the store runs on every turn, built once (building them cost more CPU than
running them)."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Select, bindparam, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.binary_vector import BinaryVector
from memory.store.records import (
    ConversationSession,
    MemoryUse,
    Person,
    StoredMessage,
    TokenUsage,
)
from memory.store.tables import Identity, Message, User
from memory.store.tables import Session as SessionRow

UNEMBEDDED = ("apology", "forgotten")
"""Statuses of messages that never get a vector: apologies, and words asked forgotten."""


def to_person(row: User) -> Person:
    """An ORM user as a `Person`."""
    return Person(
        id=row.id,
        display_name=row.display_name,
        timezone=row.timezone,
        checkin_time=row.checkin_time,
        quiet_start=row.quiet_start,
        quiet_end=row.quiet_end,
        paused=row.paused,
        memory_notices=row.memory_notices,
        created_at=row.created_at,
        timezone_known=row.timezone_known,
        timezone_asks=row.timezone_asks,
        timezone_asked_at=row.timezone_asked_at,
        timezone_offered=row.timezone_offered,
    )


def to_session(row: SessionRow) -> ConversationSession:
    """An ORM session as a `ConversationSession`."""
    return ConversationSession(
        id=row.id,
        user_id=row.user_id,
        started_at=row.started_at,
        last_message_at=row.last_message_at,
        closed_at=row.closed_at,
        summary=row.summary,
        summarized_through=row.summarized_through,
        extracted_through=row.extracted_through,
    )


def stored_messages() -> Select[int, int, int, str, str, datetime, str]:
    """A select of just what a `StoredMessage` holds: no vector, no tsvector to decode."""
    return select(
        Message.id,
        Message.user_id,
        Message.session_id,
        Message.role,
        Message.content,
        Message.created_at,
        Message.status,
    )


def to_message(row: Message) -> StoredMessage:
    """An ORM message as a `StoredMessage`."""
    return StoredMessage(
        id=row.id,
        user_id=row.user_id,
        session_id=row.session_id,
        role=row.role,
        content=row.content,
        created_at=row.created_at,
        status=row.status,
    )


async def current_session(
    db: AsyncSession, user_id: int, now: datetime, idle_gap: timedelta
) -> tuple[SessionRow, int | None]:
    """The person's open session (locked, its last message time moved to `now`), or a new
    one after closing an idle one (marked for extraction); with the id of the session
    closed, if any. The common case, a session still open, takes one statement."""
    open_session = (
        select(SessionRow.id)
        .where(SessionRow.user_id == user_id, SessionRow.closed_at.is_(None))
        .order_by(SessionRow.id.desc())
        .limit(1)
        .with_for_update()
        .scalar_subquery()
    )
    touched = await db.scalar(
        update(SessionRow)
        .where(SessionRow.id == open_session, SessionRow.last_message_at >= now - idle_gap)
        .values(last_message_at=now)
        .returning(SessionRow)
        .execution_options(populate_existing=True)
    )
    if touched is not None:
        return touched, None
    current = await db.scalar(
        select(SessionRow)
        .where(SessionRow.user_id == user_id, SessionRow.closed_at.is_(None))
        .order_by(SessionRow.id.desc())
        .limit(1)
        .with_for_update()
    )
    closed_id = None
    if current is not None:
        current.closed_at = current.last_message_at
        current.extraction_due = True
        closed_id = current.id
    fresh = await db.scalar(  # autoflush writes the closed one first
        insert(SessionRow)
        .values(user_id=user_id, started_at=now, last_message_at=now)
        .returning(SessionRow)
    )
    assert fresh is not None  # an INSERT … RETURNING returns its row
    return fresh, closed_id


def stored_as(chat_id: str | None, platform_message_id: str | None) -> Any:
    """The id of the person's message already stored under this platform message id."""
    if platform_message_id is None:
        return literal(None, BigInteger).label("existing_id")
    return (
        select(Message.id)
        .where(
            Message.user_id == User.id,
            Message.platform == Identity.platform,
            Message.chat_id == chat_id,
            Message.platform_message_id == platform_message_id,
            Message.role == "user",
        )
        .limit(1)
        .correlate(User, Identity)
        .scalar_subquery()
        .label("existing_id")
    )


@functools.cache
def reply_statement(*, answers: bool) -> Any:
    """Insert a reply, touch its session and (with `answers`) mark the person's waiting
    messages up to `r_through` answered; built once, bound with `r_*` parameters."""
    uid: Any = bindparam("r_uid")
    sid: Any = bindparam("r_sid")
    now: Any = bindparam("r_now")
    statement = (
        insert(Message)
        .values(
            user_id=uid,
            session_id=sid,
            role="assistant",
            content=bindparam("r_content"),
            platform=bindparam("r_platform"),
            chat_id=bindparam("r_chat"),
            created_at=now,
            status=bindparam("r_status"),
            embedding=bindparam("r_embedding", type_=BinaryVector()),
            model=bindparam("r_model"),
            input_tokens=bindparam("r_input_tokens"),
            output_tokens=bindparam("r_output_tokens"),
            cache_read_tokens=bindparam("r_cache_read_tokens"),
            cache_write_tokens=bindparam("r_cache_write_tokens"),
            memory_tokens=bindparam("r_memory_tokens"),
            memory_cut=bindparam("r_memory_cut"),
            recalled=bindparam("r_recalled"),
            degraded=bindparam("r_degraded"),
        )
        .returning(Message.id)
        .add_cte(
            update(SessionRow)
            .where(SessionRow.id == sid, SessionRow.user_id == uid)
            .values(last_message_at=func.greatest(SessionRow.last_message_at, now))
            .cte("touched")
        )
    )
    if answers:
        answered = (
            update(Message)
            .where(
                Message.user_id == uid,
                Message.session_id == sid,
                Message.role == "user",
                Message.id <= bindparam("r_through"),
                Message.status.in_(("stored", "unanswered")),
            )
            .values(status="answered")
        )
        statement = statement.add_cte(answered.cte("answered"))
    return statement


def usage_params(usage: TokenUsage | None) -> dict[str, Any]:
    return {
        "r_model": usage.model if usage else None,
        "r_input_tokens": usage.input_tokens if usage else None,
        "r_output_tokens": usage.output_tokens if usage else None,
        "r_cache_read_tokens": usage.cache_read_tokens if usage else None,
        "r_cache_write_tokens": usage.cache_write_tokens if usage else None,
    }


def memory_params(memory: MemoryUse | None) -> dict[str, Any]:
    """The `r_memory_*` parameters of `reply_statement` (all None without memory)."""
    return {
        "r_memory_tokens": memory.tokens if memory else None,
        "r_memory_cut": memory.cut if memory else None,
        "r_recalled": memory.recalled if memory else None,
        "r_degraded": memory.degraded if memory else None,
    }
