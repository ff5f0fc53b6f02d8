"""Claiming check-ins and follow-ups without reading or writing the tables behind them.

- Outreach rows by the memory they follow up. Without it, two lookups read the whole
  outbox, which only grows: asking whether a superseded event was already followed up,
  and clearing `memory_id` when a memory is deleted (the foreign key's ON DELETE SET
  NULL, once per memory the trash purge removes).
- A person's live events now carry their id and creation time, so folding follow-ups
  into a batch of check-ins is an index-only scan: before, each event found cost a read
  of its memory's page, mostly not in memory when a batch of 500 people is claimed.
- `outreach.memory_id` is no longer a foreign key. Checking it locked the memory's row
  for every follow-up folded into a batch (a write to that page, and its WAL). Only the
  trash purge deletes a memory (a person's erasure deletes their outbox too), and only
  one forgotten 30 days ago, never a live event a follow-up is written for; the purge
  now clears `memory_id` itself when it erases the follow-ups' text.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LIVE_EVENT = "category = 'event' AND valid_until IS NULL AND status IN ('active', 'dying')"


def _person_events(include: list[str]) -> None:
    op.drop_index("ix_memories_person_events", table_name="memories")
    op.create_index(
        "ix_memories_person_events",
        "memories",
        ["user_id", "event_at"],
        postgresql_include=include,
        postgresql_where=sa.text(LIVE_EVENT),
    )


def upgrade() -> None:
    op.create_index(
        "ix_outreach_memory",
        "outreach",
        ["memory_id"],
        postgresql_where=sa.text("memory_id IS NOT NULL"),
    )
    _person_events(["id", "created_at"])
    op.drop_constraint("outreach_memory_id_fkey", "outreach", type_="foreignkey")


def downgrade() -> None:
    op.execute(
        "UPDATE outreach SET memory_id = NULL WHERE memory_id IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM memories AS m WHERE m.id = outreach.memory_id)"
    )
    op.create_foreign_key(
        "outreach_memory_id_fkey", "outreach", "memories", ["memory_id"], ["id"],
        ondelete="SET NULL",
    )  # fmt: skip
    _person_events([])
    op.drop_index("ix_outreach_memory", table_name="outreach")
