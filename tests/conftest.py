"""Shared fixtures: one real PostgreSQL with pgvector per test session, a clean
database for every test that asks for one, and a controllable clock; and the reports
tests hand to the terminal summary.

With `DATABASE_URL` set, tests use that server (it must have pgvector); otherwise an
embedded server starts once in a temporary directory. Under pytest-xdist every worker is a
session of its own: its own embedded server, or its own database on the external one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog
from sqlalchemy import URL, make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from bot.bootstrap import Core, build_core
from bot.config import Settings
from memory.store.database import async_url, create_engine, migrate, session_factory, start_embedded
from tests.fakes.chat_llm import ScriptedLLM

# A turn gives up on its memory block after the recall deadline (300 ms in production) and
# answers with what is at hand: right for a person, but on a test machine busy with other
# workers a standing read can miss it, and a test of what the prompt holds flakes. Tests
# that build the core from settings get a generous deadline; the deadline's own tests
# (tests/integration/test_recall_deadline.py) set theirs explicitly.
os.environ.setdefault("COMPANION_RECALL_DEADLINE_MS", "5000")

REPORT_PROPERTY = "report"
"""A test's `record_property(REPORT_PROPERTY, text)` is shown in the terminal summary,
with or without `-s`, whether the test passed or failed."""


def pytest_configure(config: pytest.Config) -> None:
    """structlog as tests see it: its development defaults, but tracebacks printed plainly.
    With `rich` installed, the default renders every local variable of every frame, which
    takes seconds for a database error and makes timing-sensitive tests miss their
    deadlines (production logging formats tracebacks itself: `bot.logs`)."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.StackInfoRenderer(),
            structlog.dev.set_exc_info,
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            ),
        ]
    )


@dataclass
class FakeClock:
    """A clock the test moves by hand."""

    current: datetime = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> None:
        self.current += timedelta(**delta)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL URL for the whole session: `DATABASE_URL` or an embedded server."""
    external = os.environ.get("DATABASE_URL")
    if external:
        yield _worker_database(external)
        return
    server = start_embedded(Path(tmp_path_factory.mktemp("pg")))
    yield server.url
    server.stop()


def _worker_database(url: str) -> str:
    """`url` itself, or under pytest-xdist a database of this worker's own on that server."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return url
    parsed = make_url(async_url(url))
    name = f"{parsed.database}_{worker}"
    asyncio.run(_create_database(parsed.set(database="postgres"), name))
    return parsed.set(database=name).render_as_string(hide_password=False)


async def _create_database(admin: URL, name: str) -> None:
    eng = create_async_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        async with eng.connect() as conn:
            found = await conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            )
            if found.first() is None:
                await conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    finally:
        await eng.dispose()


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated engine shared by the session."""
    eng = create_engine(database_url, pool_size=5)
    await migrate(eng)
    yield eng
    await eng.dispose()


@pytest.fixture
async def db(engine: AsyncEngine) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """A session factory over empty tables."""
    await _empty_tables(engine)
    yield session_factory(engine)


async def _empty_tables(engine: AsyncEngine, attempts: int = 5) -> None:
    """TRUNCATE every table. A previous test's process or task that is still winding down
    on a loaded machine can hold a lock TRUNCATE needs: the deadlock that follows is
    retried after a pause instead of failing an unrelated test."""
    for attempt in range(1, attempts + 1):
        try:
            async with engine.begin() as conn:
                tables = ", ".join(await _existing_tables(conn))
                await conn.exec_driver_sql(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
            return
        except DBAPIError as exc:
            if attempt == attempts or "deadlock" not in str(exc.orig):
                raise
            await asyncio.sleep(0.5 * attempt)


async def _existing_tables(conn: object) -> list[str]:
    result = await conn.exec_driver_sql(  # type: ignore[attr-defined]
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
        "AND tablename <> 'alembic_version'"
    )
    return [row[0] for row in result]


@pytest.fixture
def clock() -> FakeClock:
    """A clock at a fixed Monday morning, UTC."""
    return FakeClock()


@pytest.fixture
def scripted_llm() -> ScriptedLLM:
    """The model the core talks to."""
    return ScriptedLLM()


@pytest.fixture
async def core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
    clock: FakeClock,
    tmp_path: Path,
) -> AsyncIterator[Core]:
    """A whole core (router, commands, memory) over empty tables, on the fake clock."""
    settings = Settings(database_url=database_url, data_dir=tmp_path, burst_window_seconds=0.05)
    built = await build_core(settings, llm=scripted_llm, clock=clock)
    yield built
    await built.aclose()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Show the reports tests recorded (`REPORT_PROPERTY`), one section each."""
    for reports in list(terminalreporter.stats.values()):
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name == REPORT_PROPERTY:
                    terminalreporter.write_sep("-", f"report: {report.nodeid}")
                    terminalreporter.write_line(str(value))
