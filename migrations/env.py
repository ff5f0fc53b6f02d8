"""Alembic environment: runs migrations over an async engine.

`memory.store.database.migrate` hands a live connection in `config.attributes["connection"]`
(so migrations run inside the app's event loop); the `alembic` command line instead
gives `sqlalchemy.url` and this module opens its own async engine.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

config = context.config


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine() -> None:
    engine = create_async_engine(config.get_main_option("sqlalchemy.url") or "")
    async with engine.connect() as conn:
        await conn.run_sync(_run)
        await conn.commit()
    await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `companion db upgrade`")

_given = config.attributes.get("connection")
if _given is None:
    asyncio.run(_run_with_own_engine())
else:
    _run(_given)
