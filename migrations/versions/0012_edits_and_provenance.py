"""Edits and the provenance of every memory.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The memory a person pressed Edit on, waiting for their next private message as its
    # new text, until `pending_edit_until`. On the person's row, so the inbound statement
    # that already reads it learns of a waiting edit at no extra cost.
    op.add_column("users", sa.Column("pending_edit", sa.Integer(), nullable=True))
    op.add_column(
        "users", sa.Column("pending_edit_until", sa.DateTime(timezone=True), nullable=True)
    )
    # A closed session whose summary was dropped because words in it were forgotten (or
    # came back): the nightly patrol writes it again from what is visible now.
    op.add_column(
        "sessions",
        sa.Column("summary_stale", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("sessions", "summary_stale")
    op.drop_column("users", "pending_edit_until")
    op.drop_column("users", "pending_edit")
