"""Memory writes for one person inside one open transaction.

`SqlMemories` wraps each public method in its own batch; extraction uses one
batch for all of a run's stores and its watermark, so a crash never half-applies.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Float, Select, and_, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import undefer

from memory.store.errors import MemoryNotFound
from memory.store.items import (
    CATEGORIES,
    LIVE_STATUSES,
    SOURCES,
    TIERS,
    Candidate,
    MemoryItem,
    content_hash,
)
from memory.store.memory_events import record_event
from memory.store.ports import Vector
from memory.store.tables import Memory, User

Embedding = list[float]


def to_item(row: Memory) -> MemoryItem:
    """An ORM memory as a `MemoryItem`."""
    return MemoryItem(
        id=row.id,
        short_id=row.short_id,
        user_id=row.user_id,
        tier=row.tier,
        category=row.category,
        content=row.content,
        importance=row.importance,
        confidence=row.confidence,
        source=row.source,
        pinned=row.pinned,
        status=row.status,
        event_at=row.event_at,
        expires_at=row.expires_at,
        valid_from=row.valid_from,
        valid_until=row.valid_until,
        created_at=row.created_at,
        thread_id=row.thread_id,
        superseded_by=row.superseded_by,
        source_message_ids=tuple(row.source_message_ids or ()),
        last_confirmed_at=row.last_confirmed_at,
        mention_count=row.mention_count,
        unsure=row.unsure,
    )


def current(user_id: Any, statuses: Sequence[str] = LIVE_STATUSES) -> ColumnElement[bool]:
    """This person's current versions (not superseded) with one of `statuses`; `user_id`
    is an id or a bound parameter."""
    return and_(
        Memory.user_id == user_id,
        Memory.valid_until.is_(None),
        Memory.status.in_(tuple(statuses)),
    )


def _check(candidate: Candidate, source: str) -> None:
    """Refuse values the schema would reject, with a readable error."""
    if candidate.category not in CATEGORIES or candidate.tier not in TIERS:
        raise ValueError(f"unknown category/tier: {candidate.category}/{candidate.tier}")
    if source not in SOURCES:
        raise ValueError(f"unknown source: {source!r}")
    if not candidate.content.strip():
        raise ValueError("a memory needs content")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class MemoryBatch:
    """One person's memory writes in the transaction of `db`."""

    def __init__(self, db: AsyncSession, *, user_id: int, now: datetime) -> None:
        self.db = db
        self.user_id = user_id
        self.now = now

    async def lock_person(self) -> None:
        """Serialise memory writes of this person (dedupe checks see a stable state).

        `FOR NO KEY UPDATE`, so inserts elsewhere that merely reference the person
        (their inbound messages) are not held up.
        """
        found = await self.db.scalar(_lock_person(), {"uid": self.user_id})
        if found is None:
            raise MemoryNotFound(f"no person {self.user_id}")

    async def row(
        self, short_id: int, *, for_update: bool = True, with_embedding: bool = False
    ) -> Memory:
        """The row of `short_id` for this person (its vector loaded only if asked), or
        `MemoryNotFound`."""
        query = select(Memory).where(Memory.user_id == self.user_id, Memory.short_id == short_id)
        if with_embedding:
            query = query.options(undefer(Memory.embedding))
        found = await self.db.scalar(query.with_for_update() if for_update else query)
        if found is None:
            raise MemoryNotFound(f"no memory m{short_id}")
        return found

    async def _next_short_id(self) -> int:
        seq = await self.db.scalar(
            update(User)
            .where(User.id == self.user_id)
            .values(memory_seq=User.memory_seq + 1)
            .returning(User.memory_seq)
        )
        if seq is None:
            raise MemoryNotFound(f"no person {self.user_id}")
        return int(seq)

    async def _insert(
        self, candidate: Candidate, *, source: str, embedding: Embedding | None
    ) -> Memory:
        _check(candidate, source)
        row = Memory(
            user_id=self.user_id,
            short_id=await self._next_short_id(),
            tier=candidate.tier,
            category=candidate.category,
            content=candidate.content,
            content_hash=content_hash(candidate.content),
            importance=candidate.importance,
            confidence=candidate.confidence,
            source=source,
            source_message_ids=list(candidate.source_message_ids),
            thread_id=candidate.thread_id,
            event_at=candidate.event_at,
            expires_at=candidate.expires_at,
            unsure=candidate.unsure,
            valid_from=self.now,
            embedding=embedding,
            created_at=self.now,
            recall_seq=select(User.session_seq).where(User.id == self.user_id).scalar_subquery(),
        )
        self.db.add(row)
        await self.db.flush()
        return row

    async def add(
        self, candidate: Candidate, *, source: str, actor: str, embedding: Embedding | None
    ) -> MemoryItem:
        """Store a new memory with the next short id, and record it."""
        row = await self._insert(candidate, source=source, embedding=embedding)
        await record_event(
            self.db,
            row=row,
            action="create",
            actor=actor,
            now=self.now,
            source=source,
            tier=row.tier,
            category=row.category,
        )
        return to_item(row)

    async def supersede(
        self,
        old_short_id: int,
        candidate: Candidate,
        *,
        source: str,
        actor: str,
        embedding: Embedding | None,
    ) -> MemoryItem:
        """Insert the new version and end-date the old one; nothing changes in place."""
        old = await self.row(old_short_id)
        if old.valid_until is not None:
            raise MemoryNotFound(f"m{old_short_id} is no longer current")
        row = await self._insert(candidate, source=source, embedding=embedding)
        old.valid_until = self.now
        old.superseded_by = row.id
        await record_event(
            self.db,
            row=row,
            action="supersede",
            actor=actor,
            now=self.now,
            source=source,
            old_id=old.id,
            old_short_id=old.short_id,
        )
        await self.db.flush()
        return to_item(row)

    async def add_sources(self, short_id: int, message_ids: Sequence[int]) -> None:
        """Record more messages a memory came from (the person said it again), so that
        forgetting it hides those words too."""
        if not message_ids:
            return
        row = await self.row(short_id)
        row.source_message_ids = sorted({*(row.source_message_ids or ()), *message_ids})
        await self.db.flush()

    async def refresh_expiry(self, item: MemoryItem, expires_at: datetime, *, actor: str) -> None:
        """Push an active item's expiry later because it came up again."""
        if item.expires_at is None or item.expires_at >= expires_at:
            return
        row = await self.row(item.short_id)
        previous = row.expires_at
        row.expires_at = expires_at
        await record_event(
            self.db,
            row=row,
            action="refresh",
            actor=actor,
            now=self.now,
            previous_expires_at=_iso(previous),
            expires_at=_iso(expires_at),
        )

    async def by_hash(
        self, digest: str, *, statuses: Sequence[str] = LIVE_STATUSES
    ) -> MemoryItem | None:
        """A current memory whose normalised text hashes to `digest`."""
        row = await self.db.scalar(
            select(Memory)
            .where(current(self.user_id, statuses), Memory.content_hash == digest)
            .order_by(Memory.id.desc())
            .limit(1)
        )
        return to_item(row) if row is not None else None

    async def similar(
        self,
        embedding: Embedding | Vector,
        *,
        limit: int = 5,
        min_similarity: float = 0.0,
        statuses: Sequence[str] = LIVE_STATUSES,
    ) -> list[tuple[MemoryItem, float]]:
        """Current memories by cosine similarity to `embedding`, most similar first."""
        vector = [float(x) for x in embedding]
        distance = Memory.embedding.op("<=>", return_type=Float)(vector)
        rows = await self.db.execute(
            select(Memory, (1 - distance).label("similarity"))
            .where(current(self.user_id, statuses), Memory.embedding.is_not(None))
            .order_by(distance)
            .limit(limit)
        )
        return [
            (to_item(row), float(similarity))
            for row, similarity in rows.all()
            if similarity >= min_similarity
        ]


@functools.cache
def _lock_person() -> Select[int]:
    return select(User.id).where(User.id == bindparam("uid")).with_for_update(key_share=True)
