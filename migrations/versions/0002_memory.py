"""The memory tiers: memories, threads and their audit trail; searchable messages.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOW = sa.text("now()")
TSV = sa.Computed("to_tsvector('english', content)", persisted=True)


def _user_fk() -> sa.Column[int]:
    return sa.Column(
        "user_id", sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    )


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 256))
    op.add_column("messages", sa.Column("embedding", Vector(dim)))
    op.add_column("messages", sa.Column("tsv", TSVECTOR, TSV))
    op.create_index("ix_messages_tsv", "messages", ["tsv"], postgresql_using="gin")

    op.create_table(
        "threads",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        _user_fk(),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="open"),
        sa.Column(
            "session_ids", ARRAY(sa.BigInteger), nullable=False, server_default=sa.text("'{}'")
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
    )
    op.create_index("ix_threads_user_id", "threads", ["user_id"])

    op.create_table(
        "memories",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        _user_fk(),
        sa.Column("short_id", sa.Integer, nullable=False),
        sa.Column("tier", sa.String(8), nullable=False),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("importance", sa.Float, nullable=False),
        sa.Column("confidence", sa.Float, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column(
            "source_message_ids",
            ARRAY(sa.BigInteger),
            nullable=False,
            server_default=sa.text("'{}'"),
        ),
        sa.Column("thread_id", sa.BigInteger, sa.ForeignKey("threads.id", ondelete="SET NULL")),
        sa.Column("event_at", sa.DateTime(timezone=True)),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_until", sa.DateTime(timezone=True)),
        sa.Column(
            "superseded_by", sa.BigInteger, sa.ForeignKey("memories.id", ondelete="SET NULL")
        ),
        sa.Column("pinned", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("status", sa.String(16), nullable=False, server_default="active"),
        sa.Column("forgotten_at", sa.DateTime(timezone=True)),
        sa.Column("recall_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_recalled_at", sa.DateTime(timezone=True)),
        sa.Column("sessions_since_recall", sa.Integer, nullable=False, server_default="0"),
        sa.Column("embedding", Vector(dim)),
        sa.Column("tsv", TSVECTOR, TSV),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.UniqueConstraint("user_id", "short_id"),
        sa.CheckConstraint("tier IN ('core', 'active')", name="memories_tier"),
        sa.CheckConstraint(
            "category IN ('identity', 'fact', 'relationship', 'preference', "
            "'thread', 'goal', 'emotion', 'event')",
            name="memories_category",
        ),
        sa.CheckConstraint("source IN ('user', 'extracted', 'companion')", name="memories_source"),
        sa.CheckConstraint(
            "status IN ('active', 'dying', 'dead', 'forgotten')", name="memories_status"
        ),
    )
    op.create_index(
        "ix_memories_user_live",
        "memories",
        ["user_id"],
        postgresql_where=sa.text("valid_until IS NULL AND status IN ('active', 'dying')"),
    )
    op.create_index("ix_memories_user_hash", "memories", ["user_id", "content_hash"])
    op.create_index("ix_memories_user_event", "memories", ["user_id", "event_at"])
    op.create_index("ix_memories_tsv", "memories", ["tsv"], postgresql_using="gin")

    op.create_table(
        "memory_events",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        _user_fk(),
        sa.Column("memory_id", sa.BigInteger, sa.ForeignKey("memories.id", ondelete="CASCADE")),
        sa.Column("action", sa.String(24), nullable=False),
        sa.Column("actor", sa.String(16), nullable=False),
        sa.Column("details", JSONB, nullable=False, server_default=sa.text("'{}'")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
    )
    op.create_index("ix_memory_events_user", "memory_events", ["user_id", "id"])


def downgrade() -> None:
    op.drop_table("memory_events")
    op.drop_table("memories")
    op.drop_table("threads")
    op.drop_index("ix_messages_tsv", table_name="messages")
    op.drop_column("messages", "tsv")
    op.drop_column("messages", "embedding")
