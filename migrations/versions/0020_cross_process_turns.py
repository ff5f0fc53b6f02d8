"""Per-person coordination across processes (issue 21): a person's turn claimed with a
lease, the quiet time of a burst, and the rate limit's token bucket, shared by every
process on the database.

The tables are UNLOGGED: what they hold only matters for a few seconds (a crash of the
database forgets it, which at worst forgives a limit or lets a turn start at once).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "turn_claims",
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("holder_key", sa.BigInteger(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        prefixes=["UNLOGGED"],
    )
    op.create_table(
        "burst_marks",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        prefixes=["UNLOGGED"],
    )
    op.create_table(
        "rate_buckets",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("allowed", sa.Boolean(), nullable=False),
        prefixes=["UNLOGGED"],
    )


def downgrade() -> None:
    op.drop_table("rate_buckets")
    op.drop_table("burst_marks")
    op.drop_table("turn_claims")
