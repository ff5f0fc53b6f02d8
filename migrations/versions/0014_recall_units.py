"""Recall units: what retrieval ranks beside single turns.

A session's summary is ranked as a unit of its own (BM25 over its english lexemes, IDF
from the person's summaries); its rank is lent to the session's turns. The lexemes are
a stored generated column, like those of messages and memories.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SUMMARY_TSV = sa.Computed("to_tsvector('english', summary)", persisted=True)


def upgrade() -> None:
    op.add_column("sessions", sa.Column("summary_tsv", TSVECTOR, SUMMARY_TSV))


def downgrade() -> None:
    op.drop_column("sessions", "summary_tsv")
