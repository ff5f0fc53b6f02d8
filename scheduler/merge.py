"""The patrol's memory-shaping steps for a batch: merge near-duplicates (found set-based by
embedding similarity) and promote what keeps coming back to core memory.

Without a model the more confident (then more recent) memory is kept and the other
folded into it; with one, the fast model writes the merged text as a new version.
Pinned and explicit memories are never folded into another, nor rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from memory.store.items import Candidate, MemoryItem
from memory.store.merging import (
    fold_memories,
    memories_by_ids,
    merge_as_new_version,
    near_duplicates,
    promote_to_core,
    recurring,
)
from memory.store.patrol import Batch
from scheduler.deps import SchedulerDeps
from scheduler.prompts import MERGE_SYSTEM, MERGE_TOOL, MergedText, merge_prompt

log = structlog.get_logger(__name__)

MERGE_SIMILARITY = 0.92
RECURRING_DAYS = 3  # a thread mentioned on this many days belongs to core memory
RECURRING_SESSIONS = 3


@dataclass(frozen=True, slots=True)
class Side:
    """What choosing the memory to keep looks at."""

    id: int
    user_id: int
    short_id: int
    pinned: bool
    explicit: bool
    confidence: float
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Fold:
    """Fold `loser` into `keeper`."""

    keeper: Side
    loser: Side
    similarity: float


def _rank(side: Side) -> tuple[bool, bool, float, datetime, int]:
    return (side.pinned, side.explicit, side.confidence, side.created_at, side.id)


def plan_folds(pairs: Sequence[tuple[int, int, float]], sides: Mapping[int, Side]) -> list[Fold]:
    """Most similar pairs first, each memory in at most one fold; the pinned, explicit,
    more confident, then more recent one is kept; protected ones are never folded."""
    used: set[int] = set()
    folds = []
    for a, b, similarity in sorted(pairs, key=lambda p: -p[2]):
        if a in used or b in used or a not in sides or b not in sides:
            continue
        keeper, loser = sorted((sides[a], sides[b]), key=_rank, reverse=True)
        if loser.pinned or loser.explicit:
            continue
        used.update((a, b))
        folds.append(Fold(keeper, loser, similarity))
    return folds


async def find_folds(
    deps: SchedulerDeps, batch: Batch, compare_since: Sequence[datetime]
) -> list[Fold]:
    """Near-duplicate pairs among each person's live memories, new ones against all."""
    pairs, items = await near_duplicates(
        deps.sessions, batch, compare_since, min_similarity=MERGE_SIMILARITY
    )
    return plan_folds(pairs, {i: _side(item) for i, item in items.items()})


def _side(row: MemoryItem) -> Side:
    return Side(
        row.id,
        row.user_id,
        row.short_id,
        row.pinned,
        row.source == "user",
        row.confidence,
        row.created_at,
    )


async def fold(deps: SchedulerDeps, folds: Sequence[Fold], *, now: datetime) -> int:
    """Fold every loser into its keeper at once (the mechanical merge)."""
    return await fold_memories(
        deps.sessions, [(f.loser.id, f.keeper.id, f.similarity) for f in folds], now=now
    )


async def merge_with_model(deps: SchedulerDeps, item: Fold, *, now: datetime) -> bool:
    """The fast model writes one text for both; it becomes the keeper's new version and the
    other is folded into it. False (nothing changed) when the model cannot answer."""
    if item.keeper.pinned or item.keeper.explicit:
        return False
    if item.keeper.user_id != item.loser.user_id:
        return False
    found = await memories_by_ids(
        deps.sessions, item.keeper.user_id, [item.keeper.id, item.loser.id]
    )
    if len(found) != 2:
        return False
    keeper, loser = found[item.keeper.id], found[item.loser.id]
    try:
        raw = await deps.tool_caller.call_tool(
            system=MERGE_SYSTEM,
            prompt=merge_prompt(keeper.content, loser.content),
            tool_name=MERGE_TOOL.name,
            tool_description=MERGE_TOOL.description,
            input_schema=MERGE_TOOL.input_schema,
        )
        merged = MergedText.model_validate(raw).content.strip()
        (embedding,) = await deps.memories.embed([merged])
    except Exception as exc:  # the model may fail in any way: keep both, fold later
        log.warning("patrol.merge_text_failed", error=type(exc).__name__)
        return False
    candidate = Candidate(
        content=merged,
        category=keeper.category,
        tier=keeper.tier,
        importance=max(keeper.importance, loser.importance),
        confidence=max(keeper.confidence, loser.confidence),
        event_at=keeper.event_at,
        expires_at=keeper.expires_at,
        source_message_ids=tuple(sorted({*keeper.source_message_ids, *loser.source_message_ids})),
        thread_id=keeper.thread_id,
    )
    return await merge_as_new_version(
        deps.memories,
        keeper,
        loser,
        candidate,
        embedding=embedding,
        similarity=item.similarity,
        now=now,
    )


async def promote(deps: SchedulerDeps, batch: Batch, *, now: datetime) -> int:
    """What keeps coming back becomes core memory (as new versions; the old stay in
    history): the situation of an open thread seen in several sessions (its most important
    live thread or goal memory; a thread with a forgotten memory never), and thread or goal
    memories mentioned again since the last patrol and on several days in all."""
    threads, memories = await recurring(
        deps.sessions, batch, min_sessions=RECURRING_SESSIONS, min_days=RECURRING_DAYS
    )
    promoted = 0
    for thread_id, user_id, short_id in threads:
        promoted += await promote_to_core(deps.memories, user_id, short_id, thread_id=thread_id)
    for user_id, short_id in memories:
        promoted += await promote_to_core(deps.memories, user_id, short_id)
    return promoted
