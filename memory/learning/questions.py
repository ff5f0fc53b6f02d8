"""Questions to the person when what they now say changes a memory they set explicitly or
pinned: asked once per proposal (stored durably), then Yes makes the proposal a new
version of that memory (history kept, the person's own words), No keeps it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import structlog
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.items import Candidate, MemoryItem, UpdateQuestion, content_hash
from memory.store.memories import SqlMemories
from memory.store.memory_batch import MemoryBatch, to_item
from memory.store.tables import Memory, MemoryQuestion

log = structlog.get_logger(__name__)

Answer = Literal["accepted", "declined", "already", "stale"]


@dataclass(frozen=True, slots=True)
class Answered:
    """What answering did: `accepted` (`item` is the new version), `declined` (`item` is
    the memory kept), `already` (answered before) or `stale` (the memory changed since
    or the question is unknown)."""

    result: Answer
    item: MemoryItem | None = None


async def ask_update(
    batch: MemoryBatch, target: MemoryItem, candidate: Candidate
) -> UpdateQuestion | None:
    """Record the question "should `candidate` replace `target`?"; None when this very
    proposal was put to the person before (whatever they answered)."""
    new_id = await batch.db.scalar(
        insert(MemoryQuestion)
        .values(
            user_id=batch.user_id,
            memory_id=target.id,
            content=candidate.content,
            content_hash=content_hash(candidate.content),
            category=candidate.category,
            tier=candidate.tier,
            importance=candidate.importance,
            confidence=candidate.confidence,
            event_at=candidate.event_at,
            expires_at=candidate.expires_at,
            source_message_ids=list(candidate.source_message_ids),
            created_at=batch.now,
        )
        .on_conflict_do_nothing(constraint="uq_memory_questions_once")
        .returning(MemoryQuestion.id)
    )
    if new_id is None:
        return None
    return UpdateQuestion(int(new_id), target.label, target.content, candidate.content)


async def answer_update(
    sessions: async_sessionmaker[AsyncSession],
    memories: SqlMemories,
    *,
    user_id: int,
    question_id: int,
    accept: bool,
) -> Answered:
    """Answer one of this person's pending questions (another person's id is `stale`)."""
    proposal = await _proposal(sessions, user_id, question_id)
    vector = None
    if accept and proposal is not None:
        try:
            (vector,) = await memories.embed([proposal])
        except Exception as exc:  # stored without a vector; the patrol can fill it in
            log.warning("memory.embedding_failed", user_id=user_id, error=type(exc).__name__)
    async with memories.batch(user_id) as batch:
        question = await batch.db.scalar(
            select(MemoryQuestion)
            .where(MemoryQuestion.id == question_id, MemoryQuestion.user_id == user_id)
            .with_for_update()
        )
        if question is None:
            return Answered("stale")
        if question.status != "pending":
            return Answered("already")
        old = await batch.db.get(Memory, question.memory_id, with_for_update=True)
        question.answered_at = batch.now
        if old is None or not to_item(old).live:
            question.status = "stale"
            return Answered("stale")
        if not accept:
            question.status = "declined"
            log.info("memory.update_declined", user_id=user_id, memory_id=old.id)
            return Answered("declined", to_item(old))
        question.status = "accepted"
        item = await _accept(batch, question, old, vector)
    log.info("memory.update_accepted", user_id=user_id, memory_id=item.id)
    return Answered("accepted", item)


async def _proposal(
    sessions: async_sessionmaker[AsyncSession], user_id: int, question_id: int
) -> str | None:
    async with sessions() as db:
        return await db.scalar(
            select(MemoryQuestion.content).where(
                MemoryQuestion.id == question_id, MemoryQuestion.user_id == user_id
            )
        )


async def _accept(
    batch: MemoryBatch, question: MemoryQuestion, old: Memory, vector: list[float] | None
) -> MemoryItem:
    """The proposal as the new version of `old`: the person's own words now (source
    `user`, full confidence), in its thread, pinned if `old` was."""
    candidate = Candidate(
        content=question.content,
        category=question.category,
        tier=question.tier,
        importance=max(question.importance, old.importance),
        confidence=1.0,
        event_at=question.event_at,
        expires_at=question.expires_at,
        source_message_ids=tuple(question.source_message_ids or ()),
        thread_id=old.thread_id,
    )
    item = await batch.supersede(
        old.short_id, candidate, source="user", actor="user", embedding=vector
    )
    if old.pinned:
        row = await batch.row(item.short_id)
        row.pinned = True
        await batch.db.flush()
        item = to_item(row)
    return item
