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
from sqlalchemy import select, text, update

from memory.store.items import LIVE_STATUSES, Candidate
from memory.store.memory_events import record_event
from memory.store.tables import Memory, Thread
from scheduler.deps import SchedulerDeps
from scheduler.patrol_steps import Batch
from scheduler.prompts import MERGE_SYSTEM, MERGE_TOOL, MergedText, merge_prompt

log = structlog.get_logger(__name__)

MERGE_SIMILARITY = 0.92
RECURRING_DAYS = 3  # a thread mentioned on this many days belongs to core memory
RECURRING_SESSIONS = 3

_PAIRS = text("""
WITH p AS (
    SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:since AS timestamptz[]))
        AS p(user_id, since)
),
fresh AS MATERIALIZED (
    SELECT n.id, n.user_id, n.category, n.event_at, n.embedding, p.since
    FROM p JOIN memories AS n ON n.user_id = p.user_id AND n.created_at > p.since
    WHERE n.valid_until IS NULL AND n.status IN ('active', 'dying')
      AND n.embedding IS NOT NULL
)
SELECT f.id AS a, o.id AS b, 1 - (f.embedding <=> o.embedding) AS similarity
FROM fresh AS f
CROSS JOIN LATERAL (
    SELECT o.id, o.embedding FROM memories AS o
    WHERE o.user_id = f.user_id AND o.valid_until IS NULL AND o.status IN ('active', 'dying')
      AND o.category = f.category AND o.id <> f.id AND o.embedding IS NOT NULL
      AND (o.created_at <= f.since OR o.id < f.id)
      AND (f.category <> 'event' OR f.event_at IS NOT DISTINCT FROM o.event_at)
    OFFSET 0  -- keep this a per-person index lookup: new memories are few, whatever
              -- the planner guesses, and a hash join would read everyone's memories
) AS o
WHERE (f.embedding <=> o.embedding) <= :max_distance
ORDER BY similarity DESC
""")

_FOLD = text("""
WITH pairs AS (
    SELECT * FROM unnest(CAST(:losers AS bigint[]), CAST(:keepers AS bigint[]),
                         CAST(:similarity AS float8[])) AS x(loser, keeper, similarity)
),
changed AS (
    UPDATE memories AS m SET valid_until = :now, superseded_by = pairs.keeper
    FROM pairs WHERE m.id = pairs.loser AND m.valid_until IS NULL
    RETURNING m.id, m.user_id, m.short_id, pairs.keeper, pairs.similarity
)
INSERT INTO memory_events (user_id, memory_id, action, actor, details, created_at)
SELECT c.user_id, c.id, 'merge', 'patrol',
       jsonb_build_object('short_id', c.short_id, 'into_short_id', k.short_id,
                          'into_id', c.keeper, 'similarity', round(c.similarity::numeric, 3)),
       CAST(:now AS timestamptz)
FROM changed AS c JOIN memories AS k ON k.id = c.keeper
""")

_RECURRING_THREADS = text("""
SELECT DISTINCT ON (t.id) t.id AS thread_id, t.user_id, m.short_id
FROM threads AS t
JOIN memories AS m ON m.user_id = t.user_id AND m.thread_id = t.id
WHERE t.user_id = ANY(CAST(:ids AS bigint[])) AND t.status = 'open'
  AND (SELECT count(DISTINCT s) FROM unnest(t.session_ids) AS s) >= :sessions
  AND m.valid_until IS NULL AND m.status IN ('active', 'dying') AND m.tier = 'active'
  AND m.category IN ('thread', 'goal')
  AND NOT EXISTS (SELECT 1 FROM memories AS f
                  WHERE f.user_id = t.user_id AND f.thread_id = t.id AND f.status = 'forgotten')
ORDER BY t.id, m.importance DESC, m.id DESC
""")

_RECURRING = text("""
WITH p AS (
    SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:since AS timestamptz[]))
        AS p(user_id, since)
),
touched AS (
    SELECT DISTINCT e.memory_id FROM p JOIN memory_events AS e ON e.user_id = p.user_id
    WHERE e.action = 'refresh' AND e.created_at > p.since
)
SELECT m.user_id, m.short_id FROM touched JOIN memories AS m ON m.id = touched.memory_id
WHERE m.valid_until IS NULL AND m.status IN ('active', 'dying') AND m.tier = 'active'
  AND m.category IN ('thread', 'goal')
  AND (SELECT count(DISTINCT e.created_at::date) FROM memory_events AS e
       WHERE e.user_id = m.user_id AND e.memory_id = m.id
         AND e.action IN ('create', 'refresh')) >= :days
""")


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
    params = {
        "ids": list(batch.ids),
        "since": list(compare_since),
        "max_distance": 1 - MERGE_SIMILARITY,
    }
    async with deps.sessions() as db:
        pairs = [(r.a, r.b, float(r.similarity)) for r in await db.execute(_PAIRS, params)]
        ids = {i for a, b, _ in pairs for i in (a, b)}
        rows = list(await db.scalars(select(Memory).where(Memory.id.in_(ids)))) if ids else []
    sides = {r.id: _side(r) for r in rows}
    return plan_folds(pairs, sides)


def _side(row: Memory) -> Side:
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
    if not folds:
        return 0
    params = {
        "losers": [f.loser.id for f in folds],
        "keepers": [f.keeper.id for f in folds],
        "similarity": [f.similarity for f in folds],
        "now": now,
    }
    async with deps.sessions.begin() as db:
        result = await db.execute(_FOLD, params)
    return int(getattr(result, "rowcount", 0) or 0)


async def merge_with_model(deps: SchedulerDeps, item: Fold, *, now: datetime) -> bool:
    """The fast model writes one text for both; it becomes the keeper's new version and the
    other is folded into it. False (nothing changed) when the model cannot answer."""
    if item.keeper.pinned or item.keeper.explicit:
        return False
    async with deps.sessions() as db:
        keeper = await db.get_one(Memory, item.keeper.id)
        loser = await db.get_one(Memory, item.loser.id)
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
    async with deps.memories.batch(keeper.user_id) as batch:
        current = await batch.row(keeper.short_id)
        gone = await batch.row(loser.short_id)
        if current.valid_until is not None or gone.valid_until is not None:
            return False
        new = await batch.supersede(
            keeper.short_id, candidate, source=keeper.source, actor="patrol", embedding=embedding
        )
        gone.valid_until, gone.superseded_by = now, new.id
        await record_event(
            batch.db,
            row=gone,
            action="merge",
            actor="patrol",
            now=now,
            into_short_id=new.short_id,
            into_id=new.id,
            similarity=round(item.similarity, 3),
        )
    return True


async def promote(deps: SchedulerDeps, batch: Batch, *, now: datetime) -> int:
    """What keeps coming back becomes core memory (as new versions; the old stay in
    history): the situation of an open thread seen in several sessions (its most important
    live thread or goal memory; a thread with a forgotten memory never), and thread or goal
    memories mentioned again since the last patrol and on several days in all."""
    async with deps.sessions() as db:
        threads = (
            await db.execute(
                _RECURRING_THREADS, {"ids": list(batch.ids), "sessions": RECURRING_SESSIONS}
            )
        ).all()
        recurring = (
            await db.execute(
                _RECURRING,
                {"ids": list(batch.ids), "since": list(batch.since), "days": RECURRING_DAYS},
            )
        ).all()
    promoted = 0
    for thread_id, user_id, short_id in threads:
        promoted += await _promote_memory(deps, user_id, short_id, thread_id=thread_id)
    for user_id, short_id in recurring:
        promoted += await _promote_memory(deps, user_id, short_id)
    return promoted


async def _promote_memory(
    deps: SchedulerDeps, user_id: int, short_id: int, *, thread_id: int | None = None
) -> int:
    """A core version of an active memory; with `thread_id`, that thread is promoted."""
    async with deps.memories.batch(user_id) as batch:
        row = await batch.row(short_id, with_embedding=True)
        if row.valid_until is not None or row.tier != "active" or row.status not in LIVE_STATUSES:
            return 0
        if thread_id is not None:
            await batch.db.execute(
                update(Thread)
                .where(Thread.id == thread_id, Thread.user_id == user_id)
                .values(status="promoted")
            )
        candidate = Candidate(
            content=row.content,
            category=row.category,
            tier="core",
            importance=row.importance,
            confidence=row.confidence,
            source_message_ids=tuple(row.source_message_ids or ()),
            thread_id=row.thread_id,
        )
        embedding = [float(x) for x in row.embedding] if row.embedding is not None else None
        item = await batch.supersede(
            short_id, candidate, source=row.source, actor="patrol", embedding=embedding
        )
        new_row = await batch.row(item.short_id)
        details = {"from_short_id": short_id}
        if thread_id is not None:
            details["thread_id"] = thread_id
        await record_event(
            batch.db, row=new_row, action="promote", actor="patrol", now=batch.now, **details
        )
    return 1
