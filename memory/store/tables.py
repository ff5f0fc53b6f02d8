"""The database tables, as SQLAlchemy declarative models (the migrations are the schema).

Vectors are declared without a width here: the width is the configured embedding
dimension, fixed by the migration.

Only repositories in `memory/` touch these; everything above them sees plain
dataclasses. Every row that belongs to a person carries `user_id`, and every query
filters by it.
"""

from __future__ import annotations

from datetime import date, datetime, time
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    Time,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from memory.store.binary_vector import BinaryVector


class Base(DeclarativeBase):
    """Declarative base of every table."""


UNLOADED: dict[str, Any] = {"deferred": True, "deferred_raiseload": True}
"""Vectors and tsvectors are for SQL to rank with, not for Python to decode on every load
of a row: loading a row leaves them out, and touching them then raises (undefer them
where they are needed)."""


def _now() -> Any:
    return func.now()


class User(Base):
    """One person."""

    __tablename__ = "users"
    __table_args__ = (
        Index("ix_users_next_checkin", "next_checkin_at"),
        Index("ix_users_next_patrol", "next_patrol_at"),
        Index(
            "ix_users_unscheduled",
            "id",
            postgresql_where=text(
                "next_checkin_at IS NULL AND checkin_time IS NOT NULL AND NOT paused "
                "AND timezone_known"
            ),
        ),
        Index(  # the second timezone question, asked on their own (memory/store/timezone_asks.py)
            "ix_users_timezone_asks",
            "timezone_asked_at",
            postgresql_where=text("NOT timezone_known AND timezone_asks = 1"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    display_name: Mapped[str | None] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64), server_default="UTC")
    timezone_known: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    """Whether the person chose `timezone`: until then nothing is scheduled by it."""
    timezone_asked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    timezone_asks: Mapped[int] = mapped_column(SmallInteger, server_default=text("0"))
    timezone_offered: Mapped[str | None] = mapped_column(String(64))
    """The last zone offered from what the person said (not offered twice in a row)."""
    checkin_time: Mapped[time | None] = mapped_column(Time, server_default=text("'09:00'"))
    quiet_start: Mapped[time | None] = mapped_column(Time, server_default=text("'22:00'"))
    quiet_end: Mapped[time | None] = mapped_column(Time, server_default=text("'08:00'"))
    paused: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    memory_notices: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    reachable: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    next_checkin_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    next_patrol_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_patrol_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    memory_seq: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    session_seq: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    """The person's sessions counted by the nightly patrol so far (decay counts with it)."""
    pending_edit: Mapped[int | None] = mapped_column(Integer)
    """The short id of the memory whose new text the person's next private message is."""
    pending_edit_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class Identity(Base):
    """A platform account of a person, with the private chat used for outreach."""

    __tablename__ = "identities"
    __table_args__ = (
        UniqueConstraint("platform", "platform_user_id"),
        Index("ix_identities_outreach", "user_id", unique=True, postgresql_where=text("outreach")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    platform: Mapped[str] = mapped_column(String(32))
    platform_user_id: Mapped[str] = mapped_column(String(128))
    chat_id: Mapped[str | None] = mapped_column(String(128))
    reachable: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    outreach: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    """The account a linked person chose for check-ins (at most one per person)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class LinkCode(Base):
    """A one-time code `/link` handed to one account, stored as its hash."""

    __tablename__ = "link_codes"
    __table_args__ = (
        UniqueConstraint("code_hash", name="uq_link_codes_hash"),
        Index("ix_link_codes_user", "user_id"),
        Index("ix_link_codes_identity", "identity_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    identity_id: Mapped[int] = mapped_column(ForeignKey("identities.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    code_hash: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    tries: Mapped[int] = mapped_column(SmallInteger, server_default=text("0"))
    """Refused uses of this code (from a group, from its own person): a few burn it."""


class LinkAttempt(Base):
    """One code asked for (`issue`) or one wrong code sent (`miss`): what the per-account
    rate limits of `/link` count."""

    __tablename__ = "link_attempts"
    __table_args__ = (
        CheckConstraint("kind IN ('issue', 'miss')", name="link_attempts_kind"),
        Index("ix_link_attempts_user", "user_id", "id", unique=True),
        Index("ix_link_attempts_identity", "identity_id", "kind", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    identity_id: Mapped[int] = mapped_column(ForeignKey("identities.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    kind: Mapped[str] = mapped_column(String(8))


class Session(Base):
    """A stretch of conversation, closed after an idle gap."""

    __tablename__ = "sessions"
    __table_args__ = (
        Index("ix_sessions_user_open", "user_id", "closed_at"),
        Index("ix_sessions_user_id", "user_id", "id", unique=True),
        Index(
            "ix_sessions_import",
            "import_id",
            "id",
            postgresql_where=text("import_id IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_message_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    summary: Mapped[str] = mapped_column(Text, server_default="")
    summarized_through: Mapped[int | None] = mapped_column(BigInteger)
    extracted_through: Mapped[int | None] = mapped_column(BigInteger)
    extraction_attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    extraction_due: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    summary_stale: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    """Closed, and its summary dropped since words in it were forgotten or restored: the
    nightly patrol writes it again from what is visible."""
    import_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("imports.id", ondelete="CASCADE")
    )
    """The import this stretch of old chat came from (never a live conversation)."""
    summary_tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', summary)", persisted=True), **UNLOADED
    )
    """The summary's lexemes: recall ranks summaries as units beside single turns."""
    summary_vectors: Mapped[list[Any] | None] = mapped_column(ARRAY(BinaryVector()), **UNLOADED)
    """One vector per sentence of the summary (`summary_units`), written and cleared with it;
    recall ranks sessions by their best sentence's cosine."""


class Message(Base):
    """Every inbound and outbound message, stored before the model is called."""

    __tablename__ = "messages"
    __table_args__ = (
        Index("ix_messages_user_id", "user_id", "id", unique=True),
        Index("ix_messages_session_id", "session_id", "id"),
        Index("ix_messages_tsv", "tsv", postgresql_using="gin"),
        Index(
            "ix_messages_platform_ref",
            "platform",
            "chat_id",
            "platform_message_id",
            unique=True,
            postgresql_where=text("platform_message_id IS NOT NULL AND role = 'user'"),
        ),
        Index(
            "ix_messages_import",
            "import_id",
            "id",
            postgresql_where=text("import_id IS NOT NULL"),
        ),
        Index(
            "ix_messages_unembedded",
            "id",
            postgresql_where=text("embedding IS NULL AND status NOT IN ('apology', 'forgotten')"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str | None] = mapped_column(String(128))
    platform_message_id: Mapped[str | None] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16), server_default="stored")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    edited_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    model: Mapped[str | None] = mapped_column(String(100))
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    cache_read_tokens: Mapped[int | None] = mapped_column(Integer)
    cache_write_tokens: Mapped[int | None] = mapped_column(Integer)
    embedding: Mapped[list[float] | None] = mapped_column(BinaryVector(), **UNLOADED)
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', content)", persisted=True), **UNLOADED
    )
    import_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("imports.id", ondelete="CASCADE")
    )
    """The import this old message came from; its `created_at` is its original date."""
    author: Mapped[str | None] = mapped_column(String(200))
    """Who wrote an imported message, as the export names them."""
    memory_tokens: Mapped[int | None] = mapped_column(Integer)
    """A reply's memory block, in estimated tokens (None: no memory in its prompt)."""
    memory_cut: Mapped[bool | None] = mapped_column(Boolean)
    """Whether the memory budget left something out of that block."""
    recalled: Mapped[int | None] = mapped_column(SmallInteger)
    """How many recalled items (memories and past messages) the block showed."""
    degraded: Mapped[str | None] = mapped_column(String(16))
    """Why the block was cut short ('recall_timeout', 'context_error', ...), else None."""


class Import(Base):
    """One chat export brought in: what it held, whose words are the person's, and how
    far extraction has read (each import session's own watermark is the resume point)."""

    __tablename__ = "imports"
    __table_args__ = (
        CheckConstraint(
            "source IN ('telegram', 'chatgpt', 'discord', 'text')", name="imports_source"
        ),
        CheckConstraint("status IN ('pending', 'running', 'done')", name="imports_status"),
        Index("ix_imports_user", "user_id", "id", unique=True),
        Index("ix_imports_running", "id", postgresql_where=text("status = 'running'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    source: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), server_default="pending")
    self_name: Mapped[str | None] = mapped_column(String(200))
    participants: Mapped[list[Any]] = mapped_column(JSONB, server_default=text("'[]'"))
    message_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    extracted_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    first_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    progress_platform: Mapped[str | None] = mapped_column(String(32))
    progress_chat_id: Mapped[str | None] = mapped_column(String(128))
    progress_message_id: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Thread(Base):
    """An ongoing situation ("job interview at Acme") grouping active memories."""

    __tablename__ = "threads"
    __table_args__ = (Index("ix_threads_user_id", "user_id", "id", unique=True),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), server_default="open")
    session_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), server_default=text("'{}'"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class Memory(Base):
    """One remembered item. Updates insert a new row and end-date the old one."""

    __tablename__ = "memories"
    __table_args__ = (
        UniqueConstraint("user_id", "short_id"),
        CheckConstraint("tier IN ('core', 'active')", name="memories_tier"),
        CheckConstraint(
            "category IN ('identity', 'fact', 'relationship', 'preference', "
            "'thread', 'goal', 'emotion', 'event')",
            name="memories_category",
        ),
        CheckConstraint("source IN ('user', 'extracted', 'companion')", name="memories_source"),
        CheckConstraint(
            "status IN ('active', 'dying', 'dead', 'forgotten')", name="memories_status"
        ),
        Index(
            "ix_memories_user_live",
            "user_id",
            postgresql_where=text("valid_until IS NULL AND status IN ('active', 'dying')"),
        ),
        Index(
            "ix_memories_user_standing",
            "user_id",
            "tier",
            "pinned",
            text("importance DESC"),
            text("id DESC"),
            postgresql_where=text("valid_until IS NULL AND status IN ('active', 'dying')"),
        ),
        Index("ix_memories_user_hash", "user_id", "content_hash"),
        Index("ix_memories_user_event", "user_id", "event_at"),
        Index(
            "ix_memories_person_events",
            "user_id",
            "event_at",
            postgresql_include=["id", "created_at"],
            postgresql_where=text(
                "category = 'event' AND valid_until IS NULL AND status IN ('active', 'dying')"
            ),
        ),
        Index("ix_memories_tsv", "tsv", postgresql_using="gin"),
        # Follow-ups: events whose time has passed, across everyone.
        Index(
            "ix_memories_event_due",
            "event_at",
            postgresql_where=text("category = 'event' AND valid_until IS NULL"),
        ),
        # The nightly patrol reads only the rows a step can change, never all of a person's.
        Index(
            "ix_memories_patrol_expiry",
            "user_id",
            "expires_at",
            postgresql_where=text(
                "tier = 'active' AND valid_until IS NULL AND status IN ('active', 'dying') "
                "AND NOT pinned"
            ),
        ),
        Index(
            "ix_memories_dying",
            "user_id",
            postgresql_where=text("status = 'dying' AND valid_until IS NULL"),
        ),
        Index(
            "ix_memories_trash",
            "user_id",
            "forgotten_at",
            postgresql_where=text("status = 'forgotten'"),
        ),
        Index(
            "ix_memories_user_created",
            "user_id",
            "created_at",
            postgresql_where=text("valid_until IS NULL AND status IN ('active', 'dying')"),
        ),
        Index(
            "ix_memories_superseded_by",
            "superseded_by",
            postgresql_where=text("superseded_by IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    short_id: Mapped[int] = mapped_column(Integer)
    tier: Mapped[str] = mapped_column(String(8))
    category: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    importance: Mapped[float] = mapped_column(Float)
    confidence: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(16))
    source_message_ids: Mapped[list[int]] = mapped_column(
        ARRAY(BigInteger), server_default=text("'{}'")
    )
    thread_id: Mapped[int | None] = mapped_column(ForeignKey("threads.id", ondelete="SET NULL"))
    event_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    valid_from: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    valid_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    superseded_by: Mapped[int | None] = mapped_column(
        ForeignKey("memories.id", ondelete="SET NULL")
    )
    pinned: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    status: Mapped[str] = mapped_column(String(16), server_default="active")
    forgotten_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    recall_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    last_recalled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    recall_seq: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    """The person's `session_seq` when this memory was made or last recalled."""
    last_confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When the person last restated or confirmed it (affirmation)."""
    mention_count: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    """How often the person has said or confirmed it."""
    unsure: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    """Extracted with middling confidence: recall-only until the person confirms it."""
    embedding: Mapped[list[float] | None] = mapped_column(BinaryVector(), **UNLOADED)
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', content)", persisted=True), **UNLOADED
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class MemoryEvent(Base):
    """Audit trail: who did what to which memory, and when. Powers undo and history."""

    __tablename__ = "memory_events"
    __table_args__ = (
        Index("ix_memory_events_user", "user_id", "id", unique=True),
        Index("ix_memory_events_memory", "memory_id"),
        # Threads and goals mentioned again since the last patrol (promotion to core).
        Index(
            "ix_memory_events_refresh",
            "user_id",
            "created_at",
            postgresql_where=text("action = 'refresh'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    memory_id: Mapped[int | None] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"))
    action: Mapped[str] = mapped_column(String(24))
    actor: Mapped[str] = mapped_column(String(16))
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class MemoryQuestion(Base):
    """A proposed update of an explicit or pinned memory, put to the person once: the
    proposal, the messages it came from, and their answer."""

    __tablename__ = "memory_questions"
    __table_args__ = (
        UniqueConstraint("user_id", "memory_id", "content_hash", name="uq_memory_questions_once"),
        CheckConstraint(
            "status IN ('pending', 'accepted', 'declined', 'stale')",
            name="memory_questions_status",
        ),
        Index("ix_memory_questions_memory", "memory_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    memory_id: Mapped[int] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"))
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    category: Mapped[str] = mapped_column(String(16))
    tier: Mapped[str] = mapped_column(String(8))
    importance: Mapped[float] = mapped_column(Float)
    confidence: Mapped[float] = mapped_column(Float)
    event_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    source_message_ids: Mapped[list[int]] = mapped_column(
        ARRAY(BigInteger), server_default=text("'{}'")
    )
    status: Mapped[str] = mapped_column(String(16), server_default="pending")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    answered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ButtonAction(Base):
    """The meaning behind a button's opaque token, for one person, until it expires."""

    __tablename__ = "button_actions"
    __table_args__ = (
        Index("ix_button_actions_user", "user_id", "token", unique=True),
        Index("ix_button_actions_expires", "expires_at"),
    )

    token: Mapped[str] = mapped_column(String(24), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    verb: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'"))
    single_use: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class Outreach(Base):
    """The delivery outbox: one row per intended proactive message, keyed for idempotency.

    Written before anything is sent; `sending` is committed before delivery, so a crash
    in between leaves a row that recovery marks `unknown` instead of sending again.
    """

    __tablename__ = "outreach"
    __table_args__ = (
        CheckConstraint("kind IN ('checkin', 'followup')", name="outreach_kind"),
        CheckConstraint(
            "status IN ('pending', 'sending', 'sent', 'skipped', 'failed', 'unknown')",
            name="outreach_status",
        ),
        Index("ix_outreach_user", "user_id", "id", unique=True),
        Index(
            "ix_outreach_in_flight",
            "lease_until",
            postgresql_where=text("status IN ('pending', 'sending') AND merged_into IS NULL"),
        ),
        Index(
            "ix_outreach_merged", "merged_into", postgresql_where=text("merged_into IS NOT NULL")
        ),
        Index("ix_outreach_memory", "memory_id", postgresql_where=text("memory_id IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    idempotency_key: Mapped[str] = mapped_column(String(200), unique=True)
    # The followed-up memory. Not a foreign key: checking one locked (wrote) the memory's
    # row for every follow-up claimed; the trash purge clears it instead (migration 0010).
    memory_id: Mapped[int | None] = mapped_column(BigInteger)
    merged_into: Mapped[int | None] = mapped_column(ForeignKey("outreach.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), server_default="pending")
    reason: Mapped[str | None] = mapped_column(String(32))
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    claim_token: Mapped[str | None] = mapped_column(String(32))
    text: Mapped[str | None] = mapped_column(Text)
    platform: Mapped[str | None] = mapped_column(String(32))
    platform_message_id: Mapped[str | None] = mapped_column(String(128))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class HeldNotice(Base):
    """Something the companion would have said on its own outside the person's allowed
    window (quiet hours, pause, timezone not known yet), kept until the window opens.

    Memory notices keep only the memories' ids (their text and Undo buttons are made
    when released); other messages keep their text and buttons as they were.
    """

    __tablename__ = "held_notices"
    __table_args__ = (
        CheckConstraint(
            "status IN ('held', 'sending', 'sent', 'dropped')", name="held_notices_status"
        ),
        Index("ix_held_notices_user", "user_id", "id", unique=True),
        Index(
            "ix_held_notices_waiting",
            "created_at",
            "id",
            postgresql_where=text("status = 'held'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    memory_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), server_default=text("'{}'"))
    buttons: Mapped[list[Any]] = mapped_column(JSONB, server_default=text("'[]'"))
    text: Mapped[str] = mapped_column(Text, server_default="")
    status: Mapped[str] = mapped_column(String(16), server_default="held")
    reason: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    released_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class DiaryEntry(Base):
    """The companion's diary about one person's day, and its notes to self for the next."""

    __tablename__ = "diary_entries"
    __table_args__ = (UniqueConstraint("user_id", "local_date", name="uq_diary_entries_user_date"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    local_date: Mapped[date] = mapped_column(Date)
    lines: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=text("'{}'"))
    notes_to_self: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=text("'{}'"))
    source_message_ids: Mapped[list[int]] = mapped_column(
        ARRAY(BigInteger), server_default=text("'{}'")
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class EmbedderIdentity(Base):
    """The one embedder whose vectors are stored (its name and width); see
    `memory.recall.embedder_identity`."""

    __tablename__ = "embedder_identity"
    __table_args__ = (
        CheckConstraint("id = 1", name="embedder_identity_one_row"),
        CheckConstraint("dim > 0", name="embedder_identity_dim"),
    )

    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True, server_default=text("1"))
    embedder: Mapped[str] = mapped_column(Text)
    dim: Mapped[int] = mapped_column(Integer)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


_UNLOGGED: Any = {"prefixes": ["UNLOGGED"]}
"""Coordination state that matters for seconds: no WAL, emptied by a database crash."""


class TurnClaim(Base):
    """A person's turn being answered by one process (`holder`), until `expires_at` unless
    renewed; a process that dies leaves a claim that simply runs out (UNLOGGED)."""

    __tablename__ = "turn_claims"
    __table_args__ = _UNLOGGED

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    holder: Mapped[str] = mapped_column(Text)
    holder_key: Mapped[int | None] = mapped_column(BigInteger)
    """The holder's liveness lock (a session advisory lock it keeps while it runs): when
    that is gone, the holder died and the claim is free before its lease runs out."""
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class BurstMark(Base):
    """When the last message of a burst (a person in a chat, on a platform) arrived, by
    the database's clock, whichever process stored it (UNLOGGED)."""

    __tablename__ = "burst_marks"
    __table_args__ = _UNLOGGED

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RateBucket(Base):
    """A person's rate-limit token bucket on a platform, shared by every process
    (UNLOGGED: a database crash only forgives)."""

    __tablename__ = "rate_buckets"
    __table_args__ = _UNLOGGED

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    allowed: Mapped[bool] = mapped_column(Boolean)


class SendPace(Base):
    """A bot's next free send slot on a platform (`platform:bot id`), shared by every
    process sending as that bot (UNLOGGED: a database crash only forgets the pace)."""

    __tablename__ = "send_paces"
    __table_args__ = _UNLOGGED

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    next_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class PanelLink(Base):
    """A one-time sign-in to the memory panel (a signed link, or a Telegram sign-in
    already used), by the SHA-256 of what was presented: used once, in any process."""

    __tablename__ = "panel_links"
    __table_args__ = (
        CheckConstraint("kind IN ('link', 'telegram')", name="panel_links_kind"),
        Index("ix_panel_links_user", "user_id", "digest", unique=True),
        Index("ix_panel_links_expires", "expires_at"),
    )

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(8))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class PanelSession(Base):
    """A signed-in memory panel (by the SHA-256 of its cookie) and its CSRF token."""

    __tablename__ = "panel_sessions"
    __table_args__ = (
        Index("ix_panel_sessions_user", "user_id", "digest", unique=True),
        Index("ix_panel_sessions_expires", "expires_at"),
    )

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    csrf: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
