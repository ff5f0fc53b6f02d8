"""Session summaries as recall units: one vector per summary sentence (issue 17).

A session's summary is ranked by cosine sentence by sentence beside its BM25 score, so
a question matching one thing said in a long conversation finds that conversation. The
vectors live on the session row beside the summary, written and cleared with it; they
are declared without a width (like every vector column here, the width is the
configured embedder's) and recall compares only those of the query's width.

Revision ID: 0022
Revises: 0020
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE sessions ADD COLUMN summary_vectors vector[]")


def downgrade() -> None:
    op.execute("ALTER TABLE sessions DROP COLUMN summary_vectors")
