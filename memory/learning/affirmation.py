"""Affirmation: the one rule by which a memory firms up.

A person affirms a memory by saying it again (extraction finds it `same_as` a known
one), by pressing ✓ on it, or when the chat model calls `confirm_memory` because they
affirmed it in conversation. Each affirmation, at once and in one transaction:

- stamps `last_confirmed_at` with now and counts the mention (`mention_count` + 1);
- raises confidence by 0.15, to at most 1.0, and clears `unsure`;
- restarts decay: the decay clock (`recall_seq`) starts again from the person's current
  session count, a `dying` memory (core or active) is `active` again, and an active
  memory's expiry is recomputed from now (`lifespan`: an emotion three days, a thread
  three weeks, a goal two months; an event keeps its date) — never made earlier.

An affirmed memory is therefore back in the standing block (it is `active`, sure and,
for the active tier, not expired). Retrieval alone is not affirmation: a recall counts
one activation (`recall_count`, `last_recalled_at`), which the nightly patrol uses to
keep a dying memory from dying (its decay clock restarts) while it stays `dying`, so
recall-only. Dead, forgotten and superseded memories cannot be affirmed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import structlog
from sqlalchemy import select

from memory.learning.lifespan import lifespan
from memory.store.errors import MemoryNotFound
from memory.store.items import MemoryItem
from memory.store.memories import SqlMemories
from memory.store.memory_batch import MemoryBatch, to_item
from memory.store.memory_events import record_event
from memory.store.tables import User

log = structlog.get_logger(__name__)

CONFIDENCE_STEP = 0.15
Via = Literal["restated", "button", "tool", "panel"]


@dataclass(frozen=True, slots=True)
class Affirmed:
    """The values an affirmation gives a memory."""

    confidence: float
    mention_count: int
    status: str
    expires_at: datetime | None
    last_confirmed_at: datetime


def affirmed(item: MemoryItem, now: datetime, *, expires_at: datetime | None = None) -> Affirmed:
    """What affirming `item` at `now` makes of it (a pure rule). `expires_at` is a later
    expiry the caller knows of (the restatement's own), kept if later still."""
    expiry = item.expires_at
    if item.tier == "active":
        renewed = lifespan(item.category, event_at=item.event_at, now=now).expires_at
        expiry = max(d for d in (expiry, renewed, expires_at) if d is not None)
    return Affirmed(
        confidence=min(1.0, round(item.confidence + CONFIDENCE_STEP, 6)),
        mention_count=item.mention_count + 1,
        status="active",
        expires_at=expiry,
        last_confirmed_at=now,
    )


async def affirm(
    batch: MemoryBatch,
    short_id: int,
    *,
    via: Via,
    actor: str,
    expires_at: datetime | None = None,
) -> MemoryItem:
    """Affirm one live memory of the batch's person; `MemoryNotFound` for anything else."""
    row = await batch.row(short_id)
    item = to_item(row)
    if not item.live:
        raise MemoryNotFound(f"m{short_id} is not current")
    after = affirmed(item, batch.now, expires_at=expires_at)
    seq = await batch.db.scalar(select(User.session_seq).where(User.id == batch.user_id))
    row.confidence = after.confidence
    row.mention_count = after.mention_count
    row.status = after.status
    row.expires_at = after.expires_at
    row.last_confirmed_at = after.last_confirmed_at
    row.unsure = False
    row.recall_seq = int(seq or 0)
    await record_event(
        batch.db,
        row=row,
        action="affirm",
        actor=actor,
        now=batch.now,
        via=via,
        previous_confidence=item.confidence,
        previous_status=item.status,
        was_unsure=item.unsure,
    )
    await batch.db.flush()
    log.info("memory.affirmed", user_id=batch.user_id, memory_id=row.id, via=via)
    return to_item(row)


async def affirm_memory(
    memories: SqlMemories,
    user_id: int,
    short_id: int,
    *,
    via: Via,
    source_message_ids: Sequence[int] = (),
) -> MemoryItem | None:
    """Affirm this person's memory `short_id` in a transaction of its own (a ✓ press or
    the chat model's `confirm_memory`, whose turn's messages join its sources); None when
    it is not theirs or not live."""
    try:
        async with memories.batch(user_id) as batch:
            item = await affirm(batch, short_id, via=via, actor="user")
            await batch.add_sources(short_id, source_message_ids)
            return item
    except MemoryNotFound:
        return None
