"""Plain values the memory layer hands upward; never ORM rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time


@dataclass(frozen=True, slots=True)
class Person:
    """A person and their settings."""

    id: int
    display_name: str | None
    timezone: str
    checkin_time: time | None
    quiet_start: time | None
    quiet_end: time | None
    paused: bool
    memory_notices: bool
    created_at: datetime
    timezone_known: bool = True
    """Whether the person chose `timezone` (else it is 'UTC' by default, and nothing is
    scheduled by it)."""
    timezone_asks: int = 0
    timezone_asked_at: datetime | None = None
    timezone_offered: str | None = None


@dataclass(frozen=True, slots=True)
class ConversationSession:
    """A stretch of conversation."""

    id: int
    user_id: int
    started_at: datetime
    last_message_at: datetime
    closed_at: datetime | None
    summary: str
    summarized_through: int | None
    extracted_through: int | None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored."""

    id: int
    user_id: int
    session_id: int
    role: str
    content: str
    created_at: datetime
    status: str = "stored"


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens a reply used."""

    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class MemoryUse:
    """What a reply's memory block cost: its estimated tokens, whether the budget cut
    something, how many recalled items it showed and why recall was cut short, if it
    was (`degraded`: 'recall_timeout', 'recall_error', 'context_timeout', ...)."""

    tokens: int = 0
    cut: bool = False
    recalled: int = 0
    degraded: str | None = None


@dataclass(frozen=True, slots=True)
class Inbound:
    """An inbound message after it was stored: who, in which session, and the row."""

    person: Person
    session: ConversationSession
    message: StoredMessage
    closed_session_id: int | None
    duplicate: bool = False
    pending_edit: int | None = None
    """The memory (short id) whose new text this message is, when the person pressed Edit
    and the wait has not run out."""


@dataclass(frozen=True, slots=True)
class WaitingTurn:
    """A person's last private message that was stored but never answered (the bot
    stopped or crashed before its reply), to be answered after a restart."""

    message_id: int
    user_id: int
    platform_user_id: str
    chat_id: str
    platform_message_id: str | None
    text: str
    display_name: str | None
