"""Everything stored about memories, scoped by person in every query.

Each change writes a `memory_events` row in the same transaction (that trail powers
undo and history). Another person's short id behaves exactly like a missing one.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from sqlalchemy import Select, bindparam, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.errors import MemoryNotFound, PinLimitReached
from memory.store.items import (
    LIVE_STATUSES,
    Candidate,
    MemoryEventRecord,
    MemoryHistory,
    MemoryItem,
)
from memory.store.memory_batch import Embedding, MemoryBatch, current, to_item
from memory.store.memory_events import events_of, record_event, to_event, version_rows
from memory.store.ports import Clock, Embedder, Vector
from memory.store.tables import Memory, MemoryEvent

log = structlog.get_logger(__name__)


class SqlMemories:
    """Memories in PostgreSQL: add, supersede, pin, search, history (what a person may do
    to them beyond that is `memory.care.repository.SqlMemoryRepository`)."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], embedder: Embedder, clock: Clock
    ) -> None:
        self._sessions = sessions
        self._embedder = embedder
        self._clock = clock

    @asynccontextmanager
    async def batch(self, user_id: int) -> AsyncIterator[MemoryBatch]:
        """One transaction of memory writes for this person (locked against concurrent ones)."""
        async with self._sessions.begin() as db:
            batch = MemoryBatch(db, user_id=user_id, now=self._clock.now())
            await batch.lock_person()
            yield batch

    async def embed(self, texts: list[str]) -> list[Embedding]:
        """Embeddings of `texts`, as plain lists ready to store."""
        if not texts:
            return []
        matrix = await self._embedder.embed(texts)
        return [[float(x) for x in row] for row in matrix]

    async def add(
        self, user_id: int, candidate: Candidate, *, source: str, actor: str
    ) -> MemoryItem:
        """Store a new memory with the next short id."""
        (embedding,) = await self.embed([candidate.content])
        async with self.batch(user_id) as batch:
            item = await batch.add(candidate, source=source, actor=actor, embedding=embedding)
        log.info("memory.added", user_id=user_id, memory_id=item.id, source=source, actor=actor)
        return item

    async def supersede(
        self, user_id: int, old_short_id: int, candidate: Candidate, *, source: str, actor: str
    ) -> MemoryItem:
        """Replace a current memory by a new version; the old one stays in history."""
        (embedding,) = await self.embed([candidate.content])
        async with self.batch(user_id) as batch:
            item = await batch.supersede(
                old_short_id, candidate, source=source, actor=actor, embedding=embedding
            )
        log.info("memory.superseded", user_id=user_id, memory_id=item.id, actor=actor)
        return item

    async def get(self, user_id: int, short_id: int) -> MemoryItem | None:
        """One memory of this person's, in any state (check `item.live`)."""
        async with self._sessions() as db:
            row = await db.scalar(
                select(Memory).where(Memory.user_id == user_id, Memory.short_id == short_id)
            )
        return to_item(row) if row is not None else None

    async def live(
        self, user_id: int, *, tier: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[MemoryItem]:
        """Current memories: pinned first, then by importance, then oldest first."""
        params = {"uid": user_id, "tier": tier, "limit": limit, "offset": offset}
        async with self._sessions() as db:
            rows = await db.scalars(_live_statement(by_tier=tier is not None), params)
            return [to_item(row) for row in rows]

    async def count_live(self, user_id: int, *, tier: str | None = None) -> int:
        """How many current memories (of `tier`) this person has."""
        query = select(func.count()).select_from(Memory).where(current(user_id))
        if tier is not None:
            query = query.where(Memory.tier == tier)
        async with self._sessions() as db:
            return int(await db.scalar(query) or 0)

    async def find_by_text(
        self, user_id: int, text: str, *, limit: int = 20, include_dead: bool = False
    ) -> list[MemoryItem]:
        """Current memories containing `text` (case-insensitive) or matching it as words;
        with `include_dead`, the dead ones too (an explicit search: they are in no prompt,
        and are deleted after the retention period)."""
        needle = text.strip()
        if not needle:
            return []
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        words = func.plainto_tsquery("english", needle)
        query = (
            select(Memory)
            .where(
                current(user_id, (*LIVE_STATUSES, "dead") if include_dead else LIVE_STATUSES),
                or_(Memory.content.ilike(pattern, escape="\\"), Memory.tsv.op("@@")(words)),
            )
            .order_by(Memory.content.ilike(pattern, escape="\\").desc(), Memory.importance.desc())
            .limit(limit)
        )
        async with self._sessions() as db:
            return [to_item(row) for row in await db.scalars(query)]

    async def pin(
        self, user_id: int, short_id: int, *, limit: int, actor: str = "user"
    ) -> MemoryItem:
        """Pin a current memory (always in context, never decays); at most `limit` pins."""
        async with self.batch(user_id) as batch:
            row = await batch.row(short_id)
            if not to_item(row).live:
                raise MemoryNotFound(f"m{short_id} is not current")
            if not row.pinned:
                pinned = await batch.db.scalar(
                    select(func.count()).select_from(Memory).where(current(user_id), Memory.pinned)
                )
                if (pinned or 0) >= limit:
                    raise PinLimitReached(limit)
                row.pinned = True
                await record_event(batch.db, row=row, action="pin", actor=actor, now=batch.now)
            return to_item(row)

    async def unpin(self, user_id: int, short_id: int, *, actor: str = "user") -> MemoryItem:
        """Unpin a memory."""
        async with self.batch(user_id) as batch:
            row = await batch.row(short_id)
            if row.pinned:
                row.pinned = False
                await record_event(batch.db, row=row, action="unpin", actor=actor, now=batch.now)
            return to_item(row)

    async def history(self, user_id: int, short_id: int) -> MemoryHistory:
        """Every version of this memory and every event that touched them."""
        async with self._sessions() as db:
            rows = await version_rows(db, user_id=user_id, short_id=short_id)
            events = await events_of(db, user_id=user_id, memory_ids=[r.id for r in rows])
            return MemoryHistory(
                tuple(to_item(r) for r in rows), tuple(to_event(e) for e in events)
            )

    async def events(self, user_id: int, *, limit: int = 20) -> list[MemoryEventRecord]:
        """This person's most recent memory events, newest first."""
        async with self._sessions() as db:
            rows = await db.scalars(
                select(MemoryEvent)
                .where(MemoryEvent.user_id == user_id)
                .order_by(MemoryEvent.id.desc())
                .limit(limit)
            )
            return [to_event(row) for row in rows]

    async def last_events(
        self, user_id: int, memory_ids: list[int], actions: tuple[str, ...]
    ) -> dict[int, int]:
        """The id of the latest event among `actions` about each of these memories."""
        if not memory_ids:
            return {}
        async with self._sessions() as db:
            rows = await db.execute(
                select(MemoryEvent.memory_id, func.max(MemoryEvent.id))
                .where(
                    MemoryEvent.user_id == user_id,
                    MemoryEvent.memory_id.in_(memory_ids),
                    MemoryEvent.action.in_(actions),
                )
                .group_by(MemoryEvent.memory_id)
            )
            return {int(memory): int(event) for memory, event in rows.all() if memory}

    async def similar(
        self,
        user_id: int,
        embedding: Vector | Embedding,
        *,
        limit: int = 5,
        min_similarity: float = 0.0,
    ) -> list[tuple[MemoryItem, float]]:
        """Current memories by cosine similarity, most similar first."""
        async with self._sessions() as db:
            batch = MemoryBatch(db, user_id=user_id, now=self._clock.now())
            return await batch.similar(embedding, limit=limit, min_similarity=min_similarity)

    async def by_hash(self, user_id: int, digest: str) -> MemoryItem | None:
        """The current memory whose normalised text hashes to `digest`."""
        async with self._sessions() as db:
            return await MemoryBatch(db, user_id=user_id, now=self._clock.now()).by_hash(digest)


@functools.cache
def _live_statement(*, by_tier: bool) -> Select[Memory]:
    """Current memories, pinned first, then by importance, then oldest first (bound:
    `uid`, `limit`, `offset`, and `tier` when `by_tier`). Built once per shape."""
    query = select(Memory).where(current(bindparam("uid")))
    if by_tier:
        query = query.where(Memory.tier == bindparam("tier"))
    return (
        query.order_by(Memory.pinned.desc(), Memory.importance.desc(), Memory.short_id)
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
