"""Decay counts sessions with a counter per person instead of one per memory.

A memory's sessions since it was last recalled were stored on the memory and raised
every night for every live memory of everyone who talked: at 100,000 people that was
millions of rewritten rows a night. Now the person carries `session_seq` (their sessions
counted so far) and a memory `recall_seq` (the count when it was made or last recalled);
the difference is the same number, and the patrol rewrites only memories whose status
changes.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("session_seq", sa.Integer, nullable=False, server_default="0"))
    op.add_column(
        "memories", sa.Column("recall_seq", sa.Integer, nullable=False, server_default="0")
    )
    op.execute(
        "UPDATE memories SET recall_seq = -sessions_since_recall WHERE sessions_since_recall <> 0"
    )
    op.drop_column("memories", "sessions_since_recall")


def downgrade() -> None:
    op.add_column(
        "memories",
        sa.Column("sessions_since_recall", sa.Integer, nullable=False, server_default="0"),
    )
    op.execute(
        "UPDATE memories AS m "
        "SET sessions_since_recall = greatest(u.session_seq - m.recall_seq, 0) "
        "FROM users AS u WHERE u.id = m.user_id"
    )
    op.drop_column("memories", "recall_seq")
    op.drop_column("users", "session_seq")
