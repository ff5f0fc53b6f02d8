"""The scheduler: the delivery outbox, diary entries, nightly patrol times per person.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOW = sa.text("now()")
OUTREACH_STATUSES = "('pending', 'sending', 'sent', 'skipped', 'failed', 'unknown')"


def _user_fk() -> sa.Column[int]:
    return sa.Column(
        "user_id", sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    )


PATROL_INDEXES = (
    # Follow-ups: events whose time has passed, across everyone.
    ("ix_memories_event_due", ["event_at"], "category = 'event' AND valid_until IS NULL"),
    # The nightly patrol reads only the rows a step can change, never all of a person's.
    (
        "ix_memories_patrol_expiry",
        ["user_id", "expires_at"],
        "tier = 'active' AND valid_until IS NULL AND status IN ('active', 'dying') AND NOT pinned",
    ),
    ("ix_memories_dying", ["user_id"], "status = 'dying' AND valid_until IS NULL"),
    ("ix_memories_trash", ["user_id", "forgotten_at"], "status = 'forgotten'"),
    (
        "ix_memories_user_created",
        ["user_id", "created_at"],
        "valid_until IS NULL AND status IN ('active', 'dying')",
    ),
)


def _patrol_indexes() -> None:
    for name, columns, where in PATROL_INDEXES:
        op.create_index(name, "memories", columns, postgresql_where=sa.text(where))
    # Deleting a memory (trash purge, /forget all) follows these foreign keys; without an
    # index each deleted row scans both tables. Memory history walks them too.
    op.create_index("ix_memory_events_memory", "memory_events", ["memory_id"])
    op.create_index(
        "ix_memories_superseded_by",
        "memories",
        ["superseded_by"],
        postgresql_where=sa.text("superseded_by IS NOT NULL"),
    )
    # Threads and goals mentioned again since the last patrol (promotion to core).
    op.create_index(
        "ix_memory_events_refresh",
        "memory_events",
        ["user_id", "created_at"],
        postgresql_where=sa.text("action = 'refresh'"),
    )


def upgrade() -> None:
    op.add_column("users", sa.Column("next_patrol_at", sa.DateTime(timezone=True)))
    op.add_column("users", sa.Column("last_patrol_at", sa.DateTime(timezone=True)))
    op.create_index("ix_users_next_patrol", "users", ["next_patrol_at"])
    op.create_index(
        "ix_users_unscheduled",
        "users",
        ["id"],
        postgresql_where=sa.text(
            "next_checkin_at IS NULL AND checkin_time IS NOT NULL AND NOT paused"
        ),
    )
    _patrol_indexes()

    op.create_table(
        "outreach",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        _user_fk(),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=False, unique=True),
        sa.Column("memory_id", sa.BigInteger, sa.ForeignKey("memories.id", ondelete="SET NULL")),
        sa.Column("merged_into", sa.BigInteger, sa.ForeignKey("outreach.id", ondelete="CASCADE")),
        sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
        sa.Column("reason", sa.String(32)),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        sa.Column("claim_token", sa.String(32)),
        sa.Column("text", sa.Text),
        sa.Column("platform", sa.String(32)),
        sa.Column("platform_message_id", sa.String(128)),
        sa.Column("error", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.Column("sent_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("kind IN ('checkin', 'followup')", name="outreach_kind"),
        sa.CheckConstraint(f"status IN {OUTREACH_STATUSES}", name="outreach_status"),
    )
    op.create_index("ix_outreach_user", "outreach", ["user_id", "id"])
    op.create_index(
        "ix_outreach_in_flight",
        "outreach",
        ["lease_until"],
        postgresql_where=sa.text("status IN ('pending', 'sending') AND merged_into IS NULL"),
    )
    op.create_index(
        "ix_outreach_merged",
        "outreach",
        ["merged_into"],
        postgresql_where=sa.text("merged_into IS NOT NULL"),
    )

    op.create_table(
        "diary_entries",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        _user_fk(),
        sa.Column("local_date", sa.Date, nullable=False),
        sa.Column("lines", ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'")),
        sa.Column("notes_to_self", ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'")),
        sa.Column(
            "source_message_ids",
            ARRAY(sa.BigInteger),
            nullable=False,
            server_default=sa.text("'{}'"),
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.UniqueConstraint("user_id", "local_date", name="uq_diary_entries_user_date"),
    )


def downgrade() -> None:
    op.drop_table("diary_entries")
    op.drop_table("outreach")
    op.drop_index("ix_memory_events_refresh", table_name="memory_events")
    op.drop_index("ix_memories_superseded_by", table_name="memories")
    op.drop_index("ix_memory_events_memory", table_name="memory_events")
    for name, _columns, _where in PATROL_INDEXES:
        op.drop_index(name, table_name="memories")
    op.drop_index("ix_users_unscheduled", table_name="users")
    op.drop_index("ix_users_next_patrol", table_name="users")
    op.drop_column("users", "last_patrol_at")
    op.drop_column("users", "next_patrol_at")
