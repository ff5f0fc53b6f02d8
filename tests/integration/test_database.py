"""The schema migrates on real PostgreSQL with pgvector, idempotently; pooled
connections cut by a database restart are replaced before use."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bot.bootstrap import build_core
from bot.config import Settings
from bot.domain import IncomingMessage
from memory.store.database import async_url, check_idle_connections, migrate, start_embedded
from memory.store.tables import Message
from tests.fakes.chat_llm import ScriptedLLM
from tests.support.timezone_question import plain


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


async def test_a_pooled_connection_cut_by_a_restart_is_replaced_before_use(
    tmp_path: Path,
) -> None:
    server = await asyncio.to_thread(start_embedded, tmp_path / "pg")
    checked = create_async_engine(async_url(server.url), pool_size=1, max_overflow=0)
    check_idle_connections(checked, after_seconds=0.05)
    unchecked = create_async_engine(async_url(server.url), pool_size=1, max_overflow=0)
    try:
        for engine in (checked, unchecked):  # each pools one connection
            async with engine.connect() as conn:
                assert await conn.scalar(text("SELECT 1")) == 1
        await asyncio.to_thread(server.stop)
        server = await asyncio.to_thread(start_embedded, tmp_path / "pg")
        await asyncio.sleep(0.1)
        async with checked.connect() as conn:  # checked, found dead, replaced: no error
            assert await conn.scalar(text("SELECT 1")) == 1
        with pytest.raises(DBAPIError) as cut:  # without the check the first use fails
            async with unchecked.connect() as conn:
                await conn.scalar(text("SELECT 1"))
        assert cut.value.connection_invalidated
    finally:
        await checked.dispose()
        await unchecked.dispose()
        await asyncio.to_thread(server.stop)


async def test_only_a_connection_idle_for_a_while_is_checked(tmp_path: Path) -> None:
    server = await asyncio.to_thread(start_embedded, tmp_path / "pg")
    engines = []
    try:
        for after in (60.0, 0.0):
            engine = create_async_engine(async_url(server.url), pool_size=1, max_overflow=0)
            engines.append(engine)
            check_idle_connections(engine, after_seconds=after)
            pings = count_pings(engine)
            for _ in range(3):
                async with engine.connect() as conn:
                    await conn.scalar(text("SELECT 1"))
            # busy: never checked; idle past the limit: checked at every later checkout
            assert len(pings) == (0 if after else 2)
    finally:
        for engine in engines:
            await engine.dispose()
        await asyncio.to_thread(server.stop)


def count_pings(engine: AsyncEngine) -> list[object]:
    """Record every connection check the engine's dialect makes."""
    dialect = engine.sync_engine.dialect
    pings: list[object] = []
    real_ping = dialect.do_ping

    def ping(dbapi_connection: object) -> bool:
        pings.append(dbapi_connection)
        return real_ping(dbapi_connection)

    dialect.do_ping = ping  # type: ignore[method-assign]
    return pings


async def test_a_fresh_database_without_pgvector_is_migrated_and_takes_vectors_at_once(
    engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    name = f"fresh_{secrets.token_hex(4)}"
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(f"CREATE DATABASE {name}"))
    url = make_url(database_url).set(database=name).render_as_string(hide_password=False)
    core = await build_core(Settings(database_url=url, data_dir=tmp_path), llm=ScriptedLLM())
    try:
        reply = await core.router.handle(
            IncomingMessage("console", "ada", "My cat Pepper loves sardines", chat_id="c")
        )
        assert plain(reply.text) == "Tell me more."  # (first contact: the timezone question)
        async with core.sessions() as db:
            vectors = list(await db.scalars(select(Message.embedding)))
        assert len(vectors) == 2 and all(v is not None and len(v) == 384 for v in vectors)
    finally:
        await core.aclose()
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
