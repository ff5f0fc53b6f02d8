"""Every migration can be undone and done again, leaving the same schema; and the schema
they build is the one `memory.store.tables` describes."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from memory.store.database import async_url, create_engine, downgrade, migrate
from memory.store.tables import Base

_SCHEMA = """
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' '
       || is_nullable || ' ' || coalesce(column_default, '')
FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
"""


@pytest.fixture
async def empty(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on a new, empty database of the test server (dropped afterwards)."""
    name = f"migrations_{secrets.token_hex(4)}"
    admin = create_engine(database_url, pool_size=1)
    async with admin.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql(f"CREATE DATABASE {name}")
    url = make_url(async_url(database_url)).set(database=name)
    engine = create_engine(url.render_as_string(hide_password=False), pool_size=1)
    try:
        yield engine
    finally:
        await engine.dispose()
        async with admin.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.exec_driver_sql(f"DROP DATABASE {name}")
        await admin.dispose()


async def _schema(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return {row[0] for row in await conn.exec_driver_sql(_SCHEMA)}


async def test_every_migration_undoes_and_redoes_to_the_same_schema(empty: AsyncEngine) -> None:
    await migrate(empty)
    newest = await _schema(empty)
    assert any("ix_outreach_memory" in line for line in newest)

    await downgrade(empty, "base")
    left = await _schema(empty)
    assert left and all("alembic_version" in line for line in left)  # only alembic's own table
    await migrate(empty)
    assert await _schema(empty) == newest


def _differences(conn: Connection) -> list[object]:
    return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))


async def test_the_migrated_schema_is_the_one_the_tables_module_describes(
    empty: AsyncEngine,
) -> None:
    await migrate(empty)
    async with empty.connect() as conn:
        assert await conn.run_sync(_differences) == []
