"""Re-embed every stored message and memory with the configured embedder.

Run after switching embedding provider or dimension (`companion memory reembed`): the
vector columns are first resized when the width changes, which empties them, then every
row is embedded again in batches, each batch in its own short transaction, and so is
every session summary's sentences (`memory.store.summary_units`). Interrupted,
it can simply be run again. Run it while the bot is stopped: rows written meanwhile with
the old width would be rejected. Once every row is done, the new embedder is recorded as
the one the vectors come from, and the companion starts with it again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import structlog
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.embedder_identity import column_width, record_embedder
from memory.store.binary_vector import BinaryVector
from memory.store.ports import Embedder, Vector
from memory.store.summary_units import summary_vectors

log = structlog.get_logger(__name__)

Progress = Callable[[int, int], None]

# Which rows carry an embedding, as the storage path writes them (constants only).
EMBEDDED_ROWS = {
    "messages": "btrim(content) <> '' AND status <> 'apology'",
    "memories": "btrim(content) <> ''",
}
SUMMARIES = "summary <> ''"  # sessions whose summary's sentences carry vectors


async def resize(sessions: async_sessionmaker[AsyncSession], dim: int) -> list[str]:
    """Set every vector column to `dim` wide, emptying those that change; returns them."""
    changed = []
    async with sessions.begin() as db:
        for table in EMBEDDED_ROWS:
            width = await column_width(db, table)
            if width != dim:
                await db.execute(
                    text(
                        f"ALTER TABLE {table} ALTER COLUMN embedding "
                        f"TYPE vector({int(dim)}) USING NULL"
                    )
                )
                log.info("memory.reembed_resized", table=table, old=width, new=dim)
                changed.append(table)
    return changed


def vector_literal(row: Vector) -> str:
    """A vector in pgvector's text form, `[0.1,0.2,...]`."""
    return "[" + ",".join(repr(float(x)) for x in row) + "]"


async def _count(sessions: async_sessionmaker[AsyncSession]) -> int:
    async with sessions() as db:
        counts = [
            await db.scalar(text(f"SELECT count(*) FROM {table} WHERE {where}"))
            for table, where in [*EMBEDDED_ROWS.items(), ("sessions", SUMMARIES)]
        ]
    return sum(int(c or 0) for c in counts)


async def _batches(
    sessions: async_sessionmaker[AsyncSession], table: str, batch_size: int
) -> AsyncIterator[tuple[list[int], list[str]]]:
    after = 0
    select = text(
        f"SELECT id, content FROM {table} WHERE id > :after AND {EMBEDDED_ROWS[table]} "
        "ORDER BY id LIMIT :n"
    )
    while True:
        async with sessions() as db:
            rows = (await db.execute(select, {"after": after, "n": batch_size})).all()
        if not rows:
            return
        yield [int(r[0]) for r in rows], [str(r[1]) for r in rows]
        after = int(rows[-1][0])


async def reembed(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    *,
    batch_size: int = 256,
    progress: Progress | None = None,
) -> int:
    """Resize the vector columns if needed and embed every row again; returns the count."""
    await resize(sessions, embedder.dim)
    total = await _count(sessions)
    done = 0
    if progress is not None:
        progress(0, total)
    for table in EMBEDDED_ROWS:
        update = text(
            f"UPDATE {table} AS t SET embedding = CAST(d.e AS vector) "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:vectors AS text[])) AS d(id, e) "
            "WHERE t.id = d.id"
        )
        async for ids, contents in _batches(sessions, table, batch_size):
            vectors = await embedder.embed(contents)
            literals = [vector_literal(row) for row in vectors]
            async with sessions.begin() as db:
                await db.execute(update, {"ids": ids, "vectors": literals})
            done += len(ids)
            if progress is not None:
                progress(done, max(total, done))
    async for count in _reembed_summaries(sessions, embedder, batch_size):
        done += count
        if progress is not None:
            progress(done, max(total, done))
    async with sessions.begin() as db:
        await record_embedder(db, embedder)
    log.info("memory.reembedded", rows=done, embedder=embedder.name, dim=embedder.dim)
    return done


async def _reembed_summaries(
    sessions: async_sessionmaker[AsyncSession], embedder: Embedder, batch_size: int
) -> AsyncIterator[int]:
    """Embed every summary's sentences again, a batch of sessions at a time; yields how
    many each batch held."""
    select = text(
        f"SELECT id, summary FROM sessions WHERE id > :after AND {SUMMARIES} ORDER BY id LIMIT :n"
    )
    update = text("UPDATE sessions SET summary_vectors = :vectors WHERE id = :id").bindparams(
        bindparam("vectors", type_=ARRAY(BinaryVector()))
    )
    after = 0
    while True:
        async with sessions() as db:
            rows = (await db.execute(select, {"after": after, "n": batch_size})).all()
        if not rows:
            return
        found = [(int(r[0]), await summary_vectors(embedder, str(r[1]))) for r in rows]
        async with sessions.begin() as db:
            for session_id, vectors in found:
                await db.execute(update, {"id": session_id, "vectors": vectors})
        after = found[-1][0]
        yield len(found)
