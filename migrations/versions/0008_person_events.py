"""A person's live events by time, for folding follow-ups into a batch of check-ins: a
small index of events only, probed once per person in the batch.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_memories_person_events",
        "memories",
        ["user_id", "event_at"],
        postgresql_where=sa.text(
            "category = 'event' AND valid_until IS NULL AND status IN ('active', 'dying')"
        ),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_person_events", table_name="memories")
