"""Which embedder made the stored vectors: one row, compared with the configured
embedder at every start.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "embedder_identity",
        sa.Column("id", sa.SmallInteger, primary_key=True, server_default="1"),
        sa.Column("embedder", sa.Text, nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column(
            "recorded_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.CheckConstraint("id = 1", name="embedder_identity_one_row"),
        sa.CheckConstraint("dim > 0", name="embedder_identity_dim"),
    )


def downgrade() -> None:
    op.drop_table("embedder_identity")
