"""The conversation history of a turn, across session edges, in one statement.

A turn reads the current session's messages (after its running summary), the visible
messages of the person's earlier sessions that ended within the recent-past window, and
those sessions' summaries. Sessions still bound extraction; this is only what the model
sees. Imported old chats (sessions with an `import_id`) are never part of it, however
recent their dates: they are history for recall, not turns of this conversation.
Earlier sessions are found through `ix_sessions_user_open` (user, closed_at) and their
messages through `ix_messages_session_id`, so the read is bounded by the window,
not by how long the person has been talking to the companion.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, Integer, Text, TextClause, bindparam, text
from sqlalchemy.engine import Row

from memory.store.records import StoredMessage

MAX_EARLIER_SESSIONS = 20
"""The most earlier sessions one turn reads (newest first)."""

# Hidden words (forgotten, apologies, texts too long to read) never leave the database
# for the earlier sessions; the current session's are read (the turn needs its own
# message's status) and filtered by the caller.
_HISTORY = """
WITH earlier_sessions AS (
    SELECT s.id, s.summary, s.started_at, s.closed_at
    FROM sessions AS s
    WHERE s.user_id = :uid AND s.id <> :sid AND s.closed_at >= :since
      AND s.import_id IS NULL
    ORDER BY s.id DESC
    LIMIT :max_sessions
),
current_part AS (
    SELECT m.id, m.session_id, m.role, m.content, m.created_at, m.status
    FROM messages AS m
    WHERE m.user_id = :uid AND m.session_id = :sid AND m.id > :after
      AND (:chat IS NULL OR m.chat_id = :chat)
    ORDER BY m.id DESC
    LIMIT :limit
),
earlier_part AS (
    SELECT m.id, m.session_id, m.role, m.content, m.created_at, m.status
    FROM earlier_sessions AS e
    CROSS JOIN LATERAL (
        SELECT m.id, m.session_id, m.role, m.content, m.created_at, m.status
        FROM messages AS m
        WHERE m.session_id = e.id AND m.user_id = :uid AND m.created_at >= :since
          AND m.status NOT IN ('forgotten', 'apology', 'too_long', 'command')
          AND (:chat IS NULL OR m.chat_id = :chat)
        ORDER BY m.id DESC
        LIMIT :limit
    ) AS m
    ORDER BY m.id DESC
    LIMIT :limit
)
SELECT 'current' AS part, id, session_id, role, content, created_at, status,
       NULL::timestamptz AS ended_at
FROM current_part
UNION ALL
SELECT 'earlier', id, session_id, role, content, created_at, status, NULL::timestamptz
FROM earlier_part
UNION ALL
SELECT 'summary', id, id, '', summary, started_at, '', closed_at
FROM earlier_sessions
WHERE :with_summaries AND summary <> ''
"""


@functools.cache
def history_statement() -> TextClause:
    """The one statement a turn's history is read with (bound by `history_params`)."""
    return text(_HISTORY).bindparams(
        bindparam("uid", type_=BigInteger),
        bindparam("sid", type_=BigInteger),
        bindparam("after", type_=BigInteger),
        bindparam("chat", type_=Text),
        bindparam("since", type_=DateTime(timezone=True)),
        bindparam("with_summaries", type_=Boolean),
        bindparam("limit", type_=Integer),
        bindparam("max_sessions", type_=Integer),
    )


@dataclass(frozen=True, slots=True)
class SessionDigest:
    """An earlier session's summary and when it ran."""

    session_id: int
    summary: str
    started_at: datetime
    ended_at: datetime


@dataclass(frozen=True, slots=True)
class History:
    """What a turn may show of the conversation, oldest first in each part.

    `current`: the current session after its running summary (every status).
    `earlier`: visible messages of earlier sessions within the window.
    `digests`: summaries of those sessions (empty when not asked for).
    `earlier_complete`: False when `earlier` was cut by the read limit, so its oldest
    session may be missing turns.
    """

    current: list[StoredMessage]
    earlier: list[StoredMessage]
    digests: list[SessionDigest]
    earlier_complete: bool = True


HISTORY_LIMIT = 200
"""The most messages a turn reads of the current session, and of earlier ones."""


def to_history(rows: Sequence[Row[Any]], user_id: int) -> History:
    """The rows of `history_statement` as a `History`, each part oldest first."""
    current: list[StoredMessage] = []
    earlier: list[StoredMessage] = []
    digests: list[SessionDigest] = []
    for row in rows:
        if row.part == "summary":
            digests.append(SessionDigest(row.id, row.content, row.created_at, row.ended_at))
            continue
        message = StoredMessage(
            row.id, user_id, row.session_id, row.role, row.content, row.created_at, row.status
        )
        (current if row.part == "current" else earlier).append(message)
    current.sort(key=lambda m: m.id)
    earlier.sort(key=lambda m: m.id)
    digests.sort(key=lambda d: d.session_id)
    return History(current, earlier, digests, earlier_complete=len(earlier) < HISTORY_LIMIT)
