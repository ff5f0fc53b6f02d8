"""The other ways `companion` starts, as real processes: `run` with a model key and no
platform opens the terminal chat (with the operator's persona file in the system
prompt); with no `DATABASE_URL` it runs an embedded PostgreSQL in its data directory,
stops it on exit and finds the conversation again on the next start; `db upgrade`
migrates an empty database to the newest revision."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memory.store.database import create_engine
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.support.companion_process import RunningCompanion, companion_env

ROOT = Path(__file__).resolve().parents[2]
PERSONA = "You are Captain Quill, a retired lighthouse keeper who speaks in short sentences."


async def chat(env: dict[str, str], cwd: Path, lines: str) -> tuple[int, str, list[str]]:
    """`companion run` with `lines` on stdin; (exit code, stdout, log events)."""
    bot = await RunningCompanion.start("run", env=env, cwd=cwd, stdin=asyncio.subprocess.PIPE)
    try:
        assert bot.process.stdin is not None and bot.process.stdout is not None
        bot.process.stdin.write(lines.encode())
        bot.process.stdin.close()
        out = await asyncio.wait_for(bot.process.stdout.read(), timeout=60)
        code = await bot.wait()
    finally:
        await bot.kill()
    assert code == 0, bot.stderr[-3000:]
    return code, out.decode(), [entry["event"] for entry in bot.logs]


async def test_run_without_a_platform_opens_the_terminal_chat_with_the_persona_file(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    persona = tmp_path / "persona.md"
    persona.write_text(PERSONA + "\n")
    async with FakeAnthropicAPI() as anthropic:
        anthropic.queue_text("Ahoy. The lamp is lit.")
        env = companion_env(
            data_dir=tmp_path,
            database_url=database_url,
            anthropic=anthropic,
            COMPANION_PERSONA_FILE=str(persona),
        )
        _code, out, events = await chat(env, tmp_path, "hello there\n")
        (request,) = anthropic.requests
    assert "companion> Ahoy. The lamp is lit." in out
    assert "run.no_platform_configured" in events
    system = " ".join(block["text"] for block in request["system"])
    assert PERSONA in system
    assert request["messages"][-1]["role"] == "user" and "hello there" in str(request["messages"])


async def test_without_database_url_the_embedded_database_lives_in_the_data_dir(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "companion-data"
    pgdata = data_dir / "pgdata"
    async with FakeAnthropicAPI() as anthropic:
        env = companion_env(data_dir=data_dir, database_url=None, anthropic=anthropic)
        _code, out, events = await chat(env, tmp_path, "my cat is called Miso\n")
        assert "companion>" in out
        assert "db.embedded_started" in events and "db.embedded_stopped" in events
        assert (pgdata / "PG_VERSION").is_file()
        assert not (pgdata / "postmaster.pid").exists()  # the server was stopped

        _code, out, events = await chat(env, tmp_path, "what is my cat called?\n")
        assert "companion>" in out and "db.embedded_stopped" in events
        assert not (pgdata / "postmaster.pid").exists()
        last = anthropic.requests[-1]["messages"]
    assert "my cat is called Miso" in str(last) and "what is my cat called?" in str(last)


@pytest.fixture
async def empty_database(database_url: str, engine: AsyncEngine) -> AsyncIterator[str]:
    """A new, empty database on the test server (dropped afterwards); its URL."""
    name = f"upgrade_{secrets.token_hex(4)}"
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    finally:
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


async def test_db_upgrade_migrates_an_empty_database_to_the_newest_revision(
    empty_database: str, tmp_path: Path
) -> None:
    env = companion_env(data_dir=tmp_path, database_url=empty_database)
    bot = await RunningCompanion.start("db", "upgrade", env=env, cwd=tmp_path)
    try:
        assert bot.process.stdout is not None
        out = await asyncio.wait_for(bot.process.stdout.read(), timeout=60)
        code = await bot.wait()
    finally:
        await bot.kill()
    assert code == 0, bot.stderr[-3000:]
    assert out.decode().strip() == "database is up to date"
    config = Config()
    config.set_main_option("script_location", str(ROOT / "migrations"))
    head = ScriptDirectory.from_config(config).get_current_head()
    upgraded = create_engine(empty_database, pool_size=1)
    try:
        async with upgraded.connect() as conn:
            version = await conn.scalar(text("SELECT version_num FROM alembic_version"))
            extension = await conn.scalar(
                text("SELECT extname FROM pg_extension WHERE extname = 'vector'")
            )
            tables = set(
                await conn.scalars(
                    text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                )
            )
    finally:
        await upgraded.dispose()
    assert version == head
    assert extension == "vector"
    assert {"users", "identities", "sessions", "messages", "memories", "outreach"} <= tables
