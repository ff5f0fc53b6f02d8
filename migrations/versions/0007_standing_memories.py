"""The person's live memories in the order context assembly reads them (tier, pinned,
importance), so a turn reads the few it can show instead of all of them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_memories_user_standing",
        "memories",
        ["user_id", "tier", "pinned", sa.text("importance DESC"), sa.text("id DESC")],
        postgresql_where=sa.text("valid_until IS NULL AND status IN ('active', 'dying')"),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_user_standing", table_name="memories")
