"""Which embedder made the stored vectors: recorded once, compared at every start.

Vectors of different embedders (or widths) cannot be compared with each other, so the
companion must not start with another embedder than the one the database was filled
with. An empty database records the configured one; `memory.recall.reembed` records the new
one once everything is embedded again.
"""

from __future__ import annotations

import structlog
from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.errors import EmbedderMismatch, EmbedderSpec
from memory.store.ports import Embedder
from memory.store.tables import EmbedderIdentity

log = structlog.get_logger(__name__)

UNRECORDED = "an unrecorded embedder"


def spec_of(embedder: Embedder) -> EmbedderSpec:
    """What the stored vectors depend on: the embedder's name and width."""
    return EmbedderSpec(embedder.name, embedder.dim)


async def column_width(db: AsyncSession, table: str) -> int | None:
    """The declared width of `table.embedding` (None when declared without one)."""
    width = await db.scalar(
        text(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = CAST(:table AS regclass) AND attname = 'embedding'"
        ),
        {"table": table},
    )
    return int(width) if width is not None and width > 0 else None


async def _recorded(db: AsyncSession) -> EmbedderSpec | None:
    row = (
        await db.execute(select(EmbedderIdentity.embedder, EmbedderIdentity.dim).limit(1))
    ).first()
    return EmbedderSpec(str(row.embedder), int(row.dim)) if row is not None else None


async def recorded_embedder(sessions: async_sessionmaker[AsyncSession]) -> EmbedderSpec | None:
    """The embedder the stored vectors were made with, if recorded."""
    async with sessions() as db:
        return await _recorded(db)


async def check_embedder(
    sessions: async_sessionmaker[AsyncSession], embedder: Embedder
) -> EmbedderSpec:
    """The recorded embedder, which must be `embedder`: a database without a record gets
    it recorded (unless its vector columns have another width); `EmbedderMismatch`
    otherwise."""
    configured = spec_of(embedder)
    async with sessions.begin() as db:
        found = await _recorded(db)
        if found is None:
            width = await column_width(db, "memories")
            if width is not None and width != configured.dim:
                raise EmbedderMismatch(EmbedderSpec(UNRECORDED, width), configured)
            await db.execute(
                insert(EmbedderIdentity)
                .values(embedder=configured.name, dim=configured.dim)
                .on_conflict_do_nothing(index_elements=[EmbedderIdentity.id])
            )
            found = await _recorded(db)
            log.info("memory.embedder_recorded", embedder=configured.name, dim=configured.dim)
    if found != configured:
        raise EmbedderMismatch(found or EmbedderSpec(UNRECORDED, 0), configured)
    return found


async def record_embedder(db: AsyncSession, embedder: Embedder) -> None:
    """Record `embedder` as the one the stored vectors come from (in the caller's
    transaction)."""
    spec = spec_of(embedder)
    statement = insert(EmbedderIdentity).values(embedder=spec.name, dim=spec.dim)
    await db.execute(
        statement.on_conflict_do_update(
            index_elements=[EmbedderIdentity.id],
            set_={"embedder": spec.name, "dim": spec.dim, "recorded_at": text("now()")},
        )
    )
