"""Memory life cycle: affirmation (last confirmed, mentions) and unsure items.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "memories", sa.Column("last_confirmed_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "memories",
        sa.Column("mention_count", sa.Integer(), server_default=sa.text("1"), nullable=False),
    )
    op.add_column(
        "memories",
        sa.Column("unsure", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("memories", "unsure")
    op.drop_column("memories", "mention_count")
    op.drop_column("memories", "last_confirmed_at")
