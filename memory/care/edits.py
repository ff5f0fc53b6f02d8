"""Correcting a memory in the person's own words (`/edit`), and the edit a person
started with the Edit button, waiting for their next private message as the new text.

An edit supersedes: the new text is a new version (tier, category, dates, thread and pin
carried over; source `user`, like `/remember`), the old one stays in history, and undoing
the edit makes the old one current again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.errors import MemoryNotFound
from memory.store.items import Candidate, MemoryItem
from memory.store.memory_batch import Embedding, MemoryBatch, to_item
from memory.store.tables import User

EDIT_WAIT = timedelta(minutes=10)  # how long an Edit button waits for the new text
MIN_IMPORTANCE = 5.0  # the person's own words weigh at least what `/remember` gives them


async def edit_memory(
    batch: MemoryBatch,
    short_id: int,
    content: str,
    *,
    embedding: Embedding | None,
    source_message_ids: Sequence[int],
    actor: str = "user",
) -> MemoryItem:
    """Replace the current memory `short_id` by a version saying `content`, in the
    batch's transaction; `MemoryNotFound` when it is not current. The person's own edit
    makes the new version theirs (source `user`); the companion's (`actor`
    'companion', the chat model's `update_memory`) keeps the old version's source."""
    old = await batch.row(short_id)
    if not to_item(old).live:
        raise MemoryNotFound(f"m{short_id} is not current")
    candidate = Candidate(
        content=content,
        category=old.category,
        tier=old.tier,
        importance=max(old.importance, MIN_IMPORTANCE),
        confidence=1.0,
        event_at=old.event_at,
        expires_at=old.expires_at,
        source_message_ids=tuple(source_message_ids),
        thread_id=old.thread_id,
    )
    source = "user" if actor == "user" else old.source
    item = await batch.supersede(
        short_id, candidate, source=source, actor=actor, embedding=embedding
    )
    if not old.pinned:
        return item
    new = await batch.row(item.short_id)
    new.pinned = True  # the pin belongs to the memory, not to one wording of it
    await batch.db.flush()
    return to_item(new)


async def await_edit(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, short_id: int, now: datetime
) -> None:
    """Take the person's next private message (within `EDIT_WAIT`) as the new text of
    `short_id`, replacing any edit waiting before."""
    async with sessions.begin() as db:
        await db.execute(
            update(User)
            .where(User.id == user_id)
            .values(pending_edit=short_id, pending_edit_until=now + EDIT_WAIT)
        )


async def take_edit(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, short_id: int, now: datetime
) -> bool:
    """End the wait for `short_id`'s new text; True when it was still waiting (so exactly
    one message, in one process, becomes the new text)."""
    async with sessions.begin() as db:
        taken = await db.scalar(
            update(User)
            .where(
                User.id == user_id,
                User.pending_edit == short_id,
                User.pending_edit_until > now,
            )
            .values(pending_edit=None, pending_edit_until=None)
            .returning(User.id)
        )
    return taken is not None


async def cancel_edit(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, now: datetime
) -> int | None:
    """Stop waiting for an edit's new text; the short id that was still waiting, if any."""
    async with sessions.begin() as db:
        found = (
            await db.execute(
                select(User.pending_edit, User.pending_edit_until)
                .where(User.id == user_id, User.pending_edit.is_not(None))
                .with_for_update()
            )
        ).first()
        if found is None:
            return None
        await db.execute(
            update(User)
            .where(User.id == user_id)
            .values(pending_edit=None, pending_edit_until=None)
        )
    waiting, until = found
    return waiting if until is not None and until > now else None
