"""Everything stored about memories, scoped by person in every query.

Each change writes a `memory_events` row in the same transaction (that trail powers
undo and history). Another person's short id behaves exactly like a missing one.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

import structlog
from sqlalchemy import Select, bindparam, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.care.edits import edit_memory
from memory.care.forgetting import (
    TRASH_DAYS,
    forget_with_history,
    purge_forgotten,
    restore_with_history,
)
from memory.care.undo import undo_event
from memory.store.errors import MemoryNotFound, PinLimitReached
from memory.store.items import Candidate, MemoryEventRecord, MemoryHistory, MemoryItem
from memory.store.memory_batch import Embedding, MemoryBatch, current, to_item
from memory.store.memory_events import events_of, record_event, to_event, version_rows
from memory.store.ports import Clock, Embedder, Vector
from memory.store.tables import Memory, MemoryEvent
from memory.store.threads import withdraw_tainted

log = structlog.get_logger(__name__)


class SqlMemoryRepository:
    """Memories in PostgreSQL: add, supersede, forget, pin, undo, search."""

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

    async def edit(
        self, user_id: int, short_id: int, content: str, *, source_message_ids: Sequence[int]
    ) -> MemoryItem:
        """Correct a current memory in the person's own words: a new version (tier and pin
        kept, source `user`) from the messages `source_message_ids`; history is kept."""
        try:
            (embedding,) = await self.embed([content])
        except Exception as exc:  # stored all the same; recall finds it by its words
            log.warning("memory.embedding_failed", user_id=user_id, error=type(exc).__name__)
            embedding = None
        async with self.batch(user_id) as batch:
            item = await edit_memory(
                batch,
                short_id,
                content,
                embedding=embedding,
                source_message_ids=source_message_ids,
            )
        log.info("memory.edited", user_id=user_id, memory_id=item.id)
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

    async def find_by_text(self, user_id: int, text: str, *, limit: int = 20) -> list[MemoryItem]:
        """Current memories containing `text` (case-insensitive) or matching it as words."""
        needle = text.strip()
        if not needle:
            return []
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        words = func.plainto_tsquery("english", needle)
        query = (
            select(Memory)
            .where(
                current(user_id),
                or_(Memory.content.ilike(pattern, escape="\\"), Memory.tsv.op("@@")(words)),
            )
            .order_by(Memory.content.ilike(pattern, escape="\\").desc(), Memory.importance.desc())
            .limit(limit)
        )
        async with self._sessions() as db:
            return [to_item(row) for row in await db.scalars(query)]

    async def forget(self, user_id: int, short_id: int, *, actor: str = "user") -> MemoryItem:
        """Move a memory to the trash with its earlier versions, and hide the words it came
        from: it leaves every later prompt, summary and recall at once."""
        async with self.batch(user_id) as batch:
            row = await batch.row(short_id)
            if row.status != "forgotten":
                previous = await forget_with_history(batch.db, row, actor=actor, now=batch.now)
                await record_event(
                    batch.db,
                    row=row,
                    action="forget",
                    actor=actor,
                    now=batch.now,
                    previous_status=previous,
                )
            item = to_item(row)
        log.info("memory.forgotten", user_id=user_id, memory_id=item.id, actor=actor)
        return item

    async def restore(self, user_id: int, short_id: int, *, actor: str = "user") -> MemoryItem:
        """Take a memory (and what was forgotten along with it) out of the trash, back to
        the state it was forgotten in."""
        async with self.batch(user_id) as batch:
            row = await batch.row(short_id)
            if row.status != "forgotten":
                raise MemoryNotFound(f"m{short_id} is not in the trash")
            last_forget = await batch.db.scalar(
                select(MemoryEvent.details)
                .where(
                    MemoryEvent.user_id == user_id,
                    MemoryEvent.memory_id == row.id,
                    MemoryEvent.action == "forget",
                )
                .order_by(MemoryEvent.id.desc())
                .limit(1)
            )
            status = str((last_forget or {}).get("previous_status", "active"))
            await restore_with_history(batch.db, row, status)
            await record_event(batch.db, row=row, action="restore", actor=actor, now=batch.now)
            return to_item(row)

    async def trash(self, user_id: int) -> list[MemoryItem]:
        """Memories forgotten within the last 30 days, newest first (as they were current
        when forgotten: earlier versions forgotten with them are not listed apart)."""
        since = self._clock.now() - TRASH_DAYS
        async with self._sessions() as db:
            rows = await db.scalars(
                select(Memory)
                .where(
                    Memory.user_id == user_id,
                    Memory.status == "forgotten",
                    Memory.forgotten_at > since,
                    Memory.valid_until.is_(None),
                )
                .order_by(Memory.forgotten_at.desc(), Memory.id.desc())
            )
            return [to_item(row) for row in rows]

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

    async def undo(self, user_id: int, event_id: int, *, actor: str = "user") -> MemoryItem:
        """Reverse one change (create, supersede, forget, restore, pin, unpin)."""
        async with self.batch(user_id) as batch:
            row = await undo_event(
                batch.db, user_id=user_id, event_id=event_id, actor=actor, now=batch.now
            )
            item = to_item(row)
        log.info("memory.undone", user_id=user_id, event_id=event_id, actor=actor)
        return item

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

    async def purge_trash(self, now: datetime, older_than: timedelta = TRASH_DAYS) -> int:
        """Purge every person's memories forgotten more than `older_than` ago, with their
        earlier versions and the words they came from."""
        async with self._sessions.begin() as db:
            await db.execute(withdraw_tainted())
            owners = await db.scalars(
                select(Memory.user_id)
                .where(Memory.status == "forgotten", Memory.forgotten_at < now - older_than)
                .distinct()
            )
            purged = await purge_forgotten(db, user_ids=list(owners), before=now - older_than)
        log.info("memory.trash_purged", count=purged)
        return purged


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
