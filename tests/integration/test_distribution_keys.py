"""The migrated schema stays distributable by person (docs/scaling.md): read from the
live catalog of the test database after every migration (`pg_index`), not from the
models, so what is checked is what production gets.

- every table is per-person (it has `user_id`, or is `users`) or a named reference table;
- every per-person table has its primary key or a full (not partial) unique index
  containing its distribution column;
- its other unique keys contain it too, except the few named ones, each with what it
  becomes on Citus, and each named in docs/scaling.md.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.distribution import (
    COORDINATION_TABLES,
    NOT_PER_PERSON,
    REFERENCE_TABLES,
    UNIQUE_WITHOUT_PERSON,
    distribution_column,
)

ROOT = Path(__file__).resolve().parents[2]

_UNIQUE_KEYS = text("""
SELECT t.relname AS table_name,
       i.relname AS index_name,
       x.indisprimary AS is_primary,
       x.indpred IS NOT NULL AS partial,
       ARRAY(
           SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
           JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
           ORDER BY k.n
       ) AS columns
FROM pg_index x
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_namespace s ON s.oid = t.relnamespace
WHERE s.nspname = current_schema() AND x.indisunique AND t.relname <> 'alembic_version'
""")

_TABLES = text("""
SELECT c.relname,
       EXISTS (SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'user_id' AND NOT a.attisdropped)
FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
WHERE s.nspname = current_schema() AND c.relkind = 'r' AND c.relname <> 'alembic_version'
""")


async def _catalog(
    engine: AsyncEngine,
) -> tuple[dict[str, bool], list[tuple[str, str, bool, bool, tuple[str, ...]]]]:
    async with engine.connect() as conn:
        tables = {name: has_user for name, has_user in (await conn.execute(_TABLES)).all()}
        keys = [
            (row.table_name, row.index_name, row.is_primary, row.partial, tuple(row.columns))
            for row in (await conn.execute(_UNIQUE_KEYS)).all()
        ]
    return tables, keys


def _per_person(tables: dict[str, bool]) -> set[str]:
    return {name for name in tables if name not in NOT_PER_PERSON}


async def test_every_table_is_per_person_or_a_named_reference_table(engine: AsyncEngine) -> None:
    tables, _ = await _catalog(engine)
    assert set(REFERENCE_TABLES) <= set(tables), "a reference table that no longer exists"
    unplaced = sorted(name for name in _per_person(tables) if name != "users" and not tables[name])
    assert unplaced == [], (
        f"{unplaced}: no user_id. Give the table its person's user_id, or name it in "
        "tests/support/distribution.py REFERENCE_TABLES (and docs/scaling.md) with why it "
        "is shared"
    )
    assert len(_per_person(tables)) >= 12  # the check sees the real schema


async def test_every_per_person_table_has_a_unique_key_with_its_person(
    engine: AsyncEngine,
) -> None:
    tables, keys = await _catalog(engine)
    missing = []
    for table in sorted(_per_person(tables)):
        column = distribution_column(table)
        if not any(
            t == table and column in columns and not partial
            for t, _name, _primary, partial, columns in keys
        ):
            missing.append(table)
    assert missing == [], f"per-person tables without a unique key holding the person: {missing}"


async def test_other_unique_keys_hold_the_person_or_are_named_with_their_citus_form(
    engine: AsyncEngine,
) -> None:
    tables, keys = await _catalog(engine)
    without = {
        (table, columns)
        for table, _name, primary, _partial, columns in keys
        if table in _per_person(tables)
        and not primary  # a primary key without the person becomes (user_id, id) there
        and distribution_column(table) not in columns
    }
    assert without == set(UNIQUE_WITHOUT_PERSON), (
        "a unique key on a per-person table without user_id: add user_id to it, or name it "
        "in UNIQUE_WITHOUT_PERSON with what it becomes when distributed"
    )
    plan = (ROOT / "docs" / "scaling.md").read_text()
    for table, columns in UNIQUE_WITHOUT_PERSON:
        assert f"{table} ({', '.join(columns)})" in plan, (table, columns)
    for table in (*REFERENCE_TABLES, *COORDINATION_TABLES):
        assert f"`{table}`" in plan, table
