"""The memory panel: one-time sign-in links (and Telegram sign-ins already used, so a
replay fails in every process) and the panel's sessions.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _user_id() -> sa.Column[int]:
    return sa.Column(
        "user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    )


def upgrade() -> None:
    op.create_table(
        "panel_links",
        sa.Column("digest", sa.String(64), primary_key=True),
        _user_id(),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("kind IN ('link', 'telegram')", name="panel_links_kind"),
    )
    op.create_index("ix_panel_links_user", "panel_links", ["user_id", "digest"], unique=True)
    op.create_index("ix_panel_links_expires", "panel_links", ["expires_at"])
    op.create_table(
        "panel_sessions",
        sa.Column("digest", sa.String(64), primary_key=True),
        _user_id(),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.create_index("ix_panel_sessions_user", "panel_sessions", ["user_id", "digest"], unique=True)
    op.create_index("ix_panel_sessions_expires", "panel_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_table("panel_sessions")
    op.drop_table("panel_links")
