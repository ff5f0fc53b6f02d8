"""Linked identities: one person on several platforms.

`link_codes` holds the one-time codes `/link` hands out (hashed), `link_attempts` the
tries the rate limits count, and `identities.outreach` marks the one account a linked
person's check-ins go to.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _owner_columns() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "identity_id",
            sa.BigInteger(),
            sa.ForeignKey("identities.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    ]


def upgrade() -> None:
    op.add_column(
        "identities",
        sa.Column("outreach", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.create_index(
        "ix_identities_outreach",
        "identities",
        ["user_id"],
        unique=True,
        postgresql_where=sa.text("outreach"),
    )
    op.create_table(
        "link_codes",
        *_owner_columns(),
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
        sa.Column("tries", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.UniqueConstraint("code_hash", name="uq_link_codes_hash"),
    )
    op.create_index("ix_link_codes_user", "link_codes", ["user_id"])
    op.create_index("ix_link_codes_identity", "link_codes", ["identity_id"])
    op.create_table(
        "link_attempts",
        *_owner_columns(),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.CheckConstraint("kind IN ('issue', 'miss')", name="link_attempts_kind"),
    )
    op.create_index("ix_link_attempts_user", "link_attempts", ["user_id"])
    op.create_index(
        "ix_link_attempts_identity", "link_attempts", ["identity_id", "kind", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_link_attempts_identity", table_name="link_attempts")
    op.drop_index("ix_link_attempts_user", table_name="link_attempts")
    op.drop_table("link_attempts")
    op.drop_index("ix_link_codes_identity", table_name="link_codes")
    op.drop_index("ix_link_codes_user", table_name="link_codes")
    op.drop_table("link_codes")
    op.drop_index("ix_identities_outreach", table_name="identities")
    op.drop_column("identities", "outreach")
