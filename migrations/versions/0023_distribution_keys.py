"""Distribution keys: every per-person table gets a unique key that holds `user_id`.

A distributed PostgreSQL (Citus) shards per-person tables by `user_id` and needs every
primary key and unique index of such a table to contain it (docs/scaling.md). Here each
per-person table that had no such key gets one, `(user_id, <primary key>)`: mostly by
making an index it already had on `(user_id, id)` unique (no extra write cost), on
`sessions` and `held_notices` as a new index. On Citus the primary key then becomes that
index (`ADD PRIMARY KEY USING INDEX`, no rebuild). tests/integration/test_distribution_keys.py
checks it for every table.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, index, columns before, columns after); `None` before: a new index.
_KEYS: tuple[tuple[str, str, list[str] | None, list[str]], ...] = (
    ("button_actions", "ix_button_actions_user", ["user_id"], ["user_id", "token"]),
    ("link_attempts", "ix_link_attempts_user", ["user_id"], ["user_id", "id"]),
    ("threads", "ix_threads_user_id", ["user_id"], ["user_id", "id"]),
    ("messages", "ix_messages_user_id", ["user_id", "id"], ["user_id", "id"]),
    ("imports", "ix_imports_user", ["user_id", "id"], ["user_id", "id"]),
    ("memory_events", "ix_memory_events_user", ["user_id", "id"], ["user_id", "id"]),
    ("outreach", "ix_outreach_user", ["user_id", "id"], ["user_id", "id"]),
    ("sessions", "ix_sessions_user_id", None, ["user_id", "id"]),
    ("held_notices", "ix_held_notices_user", None, ["user_id", "id"]),
)


def upgrade() -> None:
    for table, index, before, after in _KEYS:
        if before is not None:
            op.drop_index(index, table_name=table)
        op.create_index(index, table, after, unique=True)


def downgrade() -> None:
    for table, index, before, _after in reversed(_KEYS):
        op.drop_index(index, table_name=table)
        if before is not None:
            op.create_index(index, table, before)
