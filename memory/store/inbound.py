"""Storing a message from someone the companion knows, in one statement.

Most messages come from a known person in an open session: then finding the person (and
whether the platform delivered this message before), touching the session and inserting
the message are one statement, which commits on its own. Anything else (a new person, a
session that went idle, a redelivered message, a race with another delivery) returns
None, and the caller takes the general path in a transaction.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import DateTime, Text, TextClause, bindparam, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.binary_vector import BinaryVector
from memory.store.records import ConversationSession, Inbound, Person, StoredMessage

# The identity row is locked for the statement, so one person's messages are stored one
# at a time. The session is touched only when it is still open and not idle; the message
# is inserted only into a touched session. `dup` finds an earlier delivery.
_STORE = """
WITH who AS (
    SELECT u.id, u.display_name, u.timezone, u.checkin_time, u.quiet_start, u.quiet_end,
           u.paused, u.memory_notices, u.created_at, u.timezone_known, u.timezone_asks,
           u.timezone_asked_at, u.timezone_offered, i.id AS identity_id,
           i.chat_id AS known_chat,
           CASE WHEN u.pending_edit_until > :now THEN u.pending_edit END AS pending_edit
    FROM identities AS i JOIN users AS u ON u.id = i.user_id
    WHERE i.platform = :platform AND i.platform_user_id = :puid
    FOR UPDATE OF i
),
dup AS (
    SELECT m.id FROM messages AS m JOIN who ON m.user_id = who.id
    WHERE m.platform = :platform AND m.chat_id IS NOT DISTINCT FROM :chat
      AND m.platform_message_id = :pmid AND m.role = 'user'
    LIMIT 1
),
touched AS (
    UPDATE sessions AS s SET last_message_at = :now
    FROM who
    WHERE s.id = (SELECT o.id FROM sessions AS o
                  WHERE o.user_id = who.id AND o.closed_at IS NULL
                  ORDER BY o.id DESC LIMIT 1)
      AND s.closed_at IS NULL AND s.last_message_at >= :active_since
      AND NOT EXISTS (SELECT 1 FROM dup)
    RETURNING s.id, s.user_id, s.started_at, s.last_message_at, s.closed_at, s.summary,
              s.summarized_through, s.extracted_through
),
chat AS (
    UPDATE identities AS i SET chat_id = :private_chat
    FROM who, touched
    WHERE i.id = who.identity_id AND :private_chat IS NOT NULL
      AND who.known_chat IS DISTINCT FROM :private_chat
),
stored AS (
    INSERT INTO messages (user_id, session_id, role, content, platform, chat_id,
                          platform_message_id, created_at, embedding)
    SELECT t.user_id, t.id, 'user', :content, :platform, :chat, :pmid, :now,
           CAST(:embedding AS vector)
    FROM touched AS t
    RETURNING id
)
SELECT who.id AS user_id, who.display_name, who.timezone, who.checkin_time,
       who.quiet_start, who.quiet_end, who.paused, who.memory_notices,
       who.created_at AS user_created_at, who.timezone_known, who.timezone_asks,
       who.timezone_asked_at, who.timezone_offered,
       (SELECT id FROM dup) AS duplicate_id,
       t.id AS session_id, t.started_at, t.last_message_at, t.closed_at, t.summary,
       t.summarized_through, t.extracted_through,
       (SELECT id FROM stored) AS message_id, who.pending_edit
FROM who LEFT JOIN touched AS t ON true
"""


@functools.cache
def _statement() -> TextClause:
    return text(_STORE).bindparams(
        bindparam("platform", type_=Text),
        bindparam("puid", type_=Text),
        bindparam("chat", type_=Text),
        bindparam("private_chat", type_=Text),
        bindparam("pmid", type_=Text),
        bindparam("content", type_=Text),
        bindparam("now", type_=DateTime(timezone=True)),
        bindparam("active_since", type_=DateTime(timezone=True)),
        bindparam("embedding", type_=BinaryVector()),
    )


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A person's message as it arrived, to be stored."""

    platform: str
    platform_user_id: str
    chat_id: str | None
    private_chat: bool
    text: str
    platform_message_id: str | None
    now: datetime
    embedding: list[float] | None


async def store_known(
    autocommit: async_sessionmaker[AsyncSession], new: NewMessage, *, idle_gap: timedelta
) -> Inbound | None:
    """Store the message of a known person in their open session, in one statement;
    None when the general path must do it (nothing was written then)."""
    params: dict[str, Any] = {
        "platform": new.platform,
        "puid": new.platform_user_id,
        "chat": new.chat_id,
        "private_chat": new.chat_id if new.private_chat else None,
        "pmid": new.platform_message_id,
        "content": new.text,
        "now": new.now,
        "active_since": new.now - idle_gap,
        "embedding": new.embedding,
    }
    try:
        async with autocommit.begin() as db:
            row = (await db.execute(_statement(), params)).mappings().first()
    except IntegrityError:
        return None  # delivered twice at the same moment: the general path sorts it out
    if row is None or row["message_id"] is None:
        return None
    return _inbound(row, new)


def _inbound(row: Any, new: NewMessage) -> Inbound:
    person = Person(
        id=row["user_id"],
        display_name=row["display_name"],
        timezone=row["timezone"],
        checkin_time=row["checkin_time"],
        quiet_start=row["quiet_start"],
        quiet_end=row["quiet_end"],
        paused=row["paused"],
        memory_notices=row["memory_notices"],
        created_at=row["user_created_at"],
        timezone_known=row["timezone_known"],
        timezone_asks=row["timezone_asks"],
        timezone_asked_at=row["timezone_asked_at"],
        timezone_offered=row["timezone_offered"],
    )
    session = ConversationSession(
        id=row["session_id"],
        user_id=row["user_id"],
        started_at=row["started_at"],
        last_message_at=row["last_message_at"],
        closed_at=row["closed_at"],
        summary=row["summary"],
        summarized_through=row["summarized_through"],
        extracted_through=row["extracted_through"],
    )
    message = StoredMessage(
        id=row["message_id"],
        user_id=row["user_id"],
        session_id=row["session_id"],
        role="user",
        content=new.text,
        created_at=new.now,
    )
    return Inbound(person, session, message, None, pending_edit=row["pending_edit"])
