"""Recall never costs a reply: each reply records what its memory block cost and whether
recall was cut short (degraded), so `companion stats` can report it.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("memory_tokens", sa.Integer(), nullable=True))
    op.add_column("messages", sa.Column("memory_cut", sa.Boolean(), nullable=True))
    op.add_column("messages", sa.Column("recalled", sa.SmallInteger(), nullable=True))
    op.add_column("messages", sa.Column("degraded", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "degraded")
    op.drop_column("messages", "recalled")
    op.drop_column("messages", "memory_cut")
    op.drop_column("messages", "memory_tokens")
