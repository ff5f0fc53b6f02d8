"""The schema migrates on real PostgreSQL with pgvector, idempotently."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memory.database import async_url, migrate


async def test_migrations_create_every_table_and_the_vector_extension(engine: AsyncEngine) -> None:
    await migrate(engine)  # a second run finds nothing to do
    async with engine.connect() as conn:
        tables = {
            row[0]
            for row in await conn.exec_driver_sql(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            )
        }
        extension = await conn.scalar(
            text("SELECT extname FROM pg_extension WHERE extname = 'vector'")
        )
    assert {"users", "identities", "sessions", "messages", "memories"} <= tables
    assert extension == "vector"


def test_async_url_accepts_the_usual_spellings() -> None:
    assert async_url("postgres://u:p@h:5432/d") == "postgresql+asyncpg://u:p@h:5432/d"
    assert async_url("postgresql://u@/d?host=/tmp/s").startswith("postgresql+asyncpg://")
