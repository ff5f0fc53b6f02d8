"""A bot's send pace shared by every process sending as it (Telegram's overall limit of
about 30 messages a second is the bot's, not a process's): the next free slot per bot.

UNLOGGED like the other coordination tables of 0020: a crash of the database forgets the
pace, which at worst lets one second's messages meet Telegram's `retry_after`.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "send_paces",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("next_at", sa.DateTime(timezone=True), nullable=False),
        prefixes=["UNLOGGED"],
    )


def downgrade() -> None:
    op.drop_table("send_paces")
