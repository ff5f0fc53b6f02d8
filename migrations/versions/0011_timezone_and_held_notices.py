"""Timezones that are known or still to ask, and memory notices held for the allowed window.

- `users.timezone_known`: whether the person chose their timezone (the column keeps
  'UTC' until they do, but nothing is scheduled by it). People who already have another
  zone than 'UTC' count as known; everyone else is asked, and their next check-in is
  cleared until they answer. `timezone_asks` / `timezone_asked_at`: how often and when
  the companion asked (twice at most); `timezone_offered`: the last zone it offered from
  what the person said, so the same offer is not made again.
- The partial index of people without a scheduled check-in now leaves out people whose
  timezone is not known (they are not scheduled).
- `held_notices`: what the companion would have said on its own outside the person's
  allowed window (quiet hours, pause, timezone unknown), kept until it opens.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNSCHEDULED = "next_checkin_at IS NULL AND checkin_time IS NOT NULL AND NOT paused"


def _unscheduled(where: str) -> None:
    op.drop_index("ix_users_unscheduled", table_name="users")
    op.create_index("ix_users_unscheduled", "users", ["id"], postgresql_where=sa.text(where))


def upgrade() -> None:
    op.add_column(
        "users",
        sa.Column("timezone_known", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.add_column("users", sa.Column("timezone_asked_at", sa.DateTime(timezone=True)))
    op.add_column(
        "users",
        sa.Column("timezone_asks", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column("users", sa.Column("timezone_offered", sa.String(64)))
    op.execute("UPDATE users SET timezone_known = true WHERE timezone <> 'UTC'")
    op.execute("UPDATE users SET next_checkin_at = NULL WHERE NOT timezone_known")
    _unscheduled(f"{UNSCHEDULED} AND timezone_known")
    op.create_index(
        "ix_users_timezone_asks",
        "users",
        ["timezone_asked_at"],
        postgresql_where=sa.text("NOT timezone_known AND timezone_asks = 1"),
    )
    op.create_table(
        "held_notices",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "memory_ids",
            postgresql.ARRAY(sa.BigInteger()),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("buttons", postgresql.JSONB(), server_default=sa.text("'[]'"), nullable=False),
        sa.Column("text", sa.Text(), server_default="", nullable=False),
        sa.Column("status", sa.String(16), server_default="held", nullable=False),
        sa.Column("reason", sa.String(32)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint(
            "status IN ('held', 'sending', 'sent', 'dropped')", name="held_notices_status"
        ),
    )
    op.create_index(
        "ix_held_notices_waiting",
        "held_notices",
        ["created_at", "id"],
        postgresql_where=sa.text("status = 'held'"),
    )


def downgrade() -> None:
    op.drop_index("ix_held_notices_waiting", table_name="held_notices")
    op.drop_table("held_notices")
    op.drop_index("ix_users_timezone_asks", table_name="users")
    _unscheduled(UNSCHEDULED)
    op.drop_column("users", "timezone_offered")
    op.drop_column("users", "timezone_asks")
    op.drop_column("users", "timezone_asked_at")
    op.drop_column("users", "timezone_known")
