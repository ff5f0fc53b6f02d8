"""Messages still waiting for a vector (stored while the embedder was failing), found by
the sweep without scanning the whole table.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_messages_unembedded",
        "messages",
        ["id"],
        postgresql_where=sa.text("embedding IS NULL AND status NOT IN ('apology', 'forgotten')"),
    )


def downgrade() -> None:
    op.drop_index("ix_messages_unembedded", table_name="messages")
