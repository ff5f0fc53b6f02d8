"""People, their platform identities, sessions and messages; the vector extension.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOW = sa.text("now()")


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "users",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("display_name", sa.String(200)),
        sa.Column("timezone", sa.String(64), nullable=False, server_default="UTC"),
        sa.Column("checkin_time", sa.Time, server_default=sa.text("'09:00'")),
        sa.Column("quiet_start", sa.Time, server_default=sa.text("'22:00'")),
        sa.Column("quiet_end", sa.Time, server_default=sa.text("'08:00'")),
        sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("memory_notices", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("reachable", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("next_checkin_at", sa.DateTime(timezone=True)),
        sa.Column("memory_seq", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
    )
    op.create_index("ix_users_next_checkin", "users", ["next_checkin_at"])
    op.create_table(
        "identities",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger,
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("platform_user_id", sa.String(128), nullable=False),
        sa.Column("chat_id", sa.String(128)),
        sa.Column("reachable", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.UniqueConstraint("platform", "platform_user_id"),
    )
    op.create_index("ix_identities_user_id", "identities", ["user_id"])
    op.create_table(
        "sessions",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger,
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_message_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
        sa.Column("summary", sa.Text, nullable=False, server_default=""),
        sa.Column("summarized_through", sa.BigInteger),
        sa.Column("extracted_through", sa.BigInteger),
        sa.Column("extraction_attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("extraction_due", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_sessions_user_open", "sessions", ["user_id", "closed_at"])
    op.create_table(
        "messages",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger,
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "session_id",
            sa.BigInteger,
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128)),
        sa.Column("platform_message_id", sa.String(128)),
        sa.Column("status", sa.String(16), nullable=False, server_default="stored"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("edited_at", sa.DateTime(timezone=True)),
        sa.Column("model", sa.String(100)),
        sa.Column("input_tokens", sa.Integer),
        sa.Column("output_tokens", sa.Integer),
        sa.Column("cache_read_tokens", sa.Integer),
        sa.Column("cache_write_tokens", sa.Integer),
        sa.CheckConstraint("role IN ('user', 'assistant')", name="messages_role"),
    )
    op.create_index("ix_messages_user_id", "messages", ["user_id", "id"])
    op.create_index("ix_messages_session_id", "messages", ["session_id", "id"])
    op.create_index(
        "ix_messages_platform_ref",
        "messages",
        ["platform", "chat_id", "platform_message_id"],
        unique=True,
        postgresql_where=sa.text("platform_message_id IS NOT NULL AND role = 'user'"),
    )


def downgrade() -> None:
    op.drop_table("messages")
    op.drop_table("sessions")
    op.drop_table("identities")
    op.drop_table("users")
