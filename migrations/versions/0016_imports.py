"""Imported chat history: imports and their progress; messages and sessions that belong
to one (their original dates and authors kept).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "imports",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), server_default="pending", nullable=False),
        sa.Column("self_name", sa.String(200)),
        sa.Column(
            "participants", postgresql.JSONB(), server_default=sa.text("'[]'"), nullable=False
        ),
        sa.Column("message_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("extracted_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True)),
        sa.Column("last_at", sa.DateTime(timezone=True)),
        sa.Column("progress_platform", sa.String(32)),
        sa.Column("progress_chat_id", sa.String(128)),
        sa.Column("progress_message_id", sa.String(128)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint(
            "source IN ('telegram', 'chatgpt', 'discord', 'text')", name="imports_source"
        ),
        sa.CheckConstraint("status IN ('pending', 'running', 'done')", name="imports_status"),
    )
    op.create_index("ix_imports_user", "imports", ["user_id", "id"])
    op.create_index(
        "ix_imports_running", "imports", ["id"], postgresql_where=sa.text("status = 'running'")
    )
    op.add_column(
        "sessions",
        sa.Column("import_id", sa.BigInteger(), sa.ForeignKey("imports.id", ondelete="CASCADE")),
    )
    op.create_index(
        "ix_sessions_import",
        "sessions",
        ["import_id", "id"],
        postgresql_where=sa.text("import_id IS NOT NULL"),
    )
    op.add_column(
        "messages",
        sa.Column("import_id", sa.BigInteger(), sa.ForeignKey("imports.id", ondelete="CASCADE")),
    )
    op.add_column("messages", sa.Column("author", sa.String(200)))
    # Another participant of an imported chat: context, never the person nor the companion.
    op.drop_constraint("messages_role", "messages", type_="check")
    op.create_check_constraint(
        "messages_role", "messages", "role IN ('user', 'assistant', 'other')"
    )
    op.create_index(
        "ix_messages_import",
        "messages",
        ["import_id", "id"],
        postgresql_where=sa.text("import_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.execute("DELETE FROM messages WHERE import_id IS NOT NULL")
    op.execute("DELETE FROM sessions WHERE import_id IS NOT NULL")
    op.drop_constraint("messages_role", "messages", type_="check")
    op.create_check_constraint("messages_role", "messages", "role IN ('user', 'assistant')")
    op.drop_index("ix_messages_import", table_name="messages")
    op.drop_column("messages", "author")
    op.drop_column("messages", "import_id")
    op.drop_index("ix_sessions_import", table_name="sessions")
    op.drop_column("sessions", "import_id")
    op.drop_index("ix_imports_running", table_name="imports")
    op.drop_index("ix_imports_user", table_name="imports")
    op.drop_table("imports")
