"""The patrol's memory-shaping statements: near-duplicate pairs among a batch of people's
live memories (set-based, by embedding similarity), folding one memory into another,
writing a merged text as a new version, and promoting what keeps coming back to core
memory. Which pairs to fold and the merged text are decided by the scheduler
(`scheduler.merge`); every change is recorded in `memory_events` (actor 'patrol').
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.items import LIVE_STATUSES, Candidate, MemoryItem
from memory.store.memories import SqlMemories
from memory.store.memory_batch import to_item
from memory.store.memory_events import record_event
from memory.store.patrol import Batch
from memory.store.tables import Memory, Thread

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
    SELECT DISTINCT e.user_id, e.memory_id FROM p JOIN memory_events AS e ON e.user_id = p.user_id
    WHERE e.action = 'refresh' AND e.created_at > p.since
)
SELECT m.user_id, m.short_id FROM touched
JOIN memories AS m ON m.user_id = touched.user_id AND m.id = touched.memory_id
WHERE m.valid_until IS NULL AND m.status IN ('active', 'dying') AND m.tier = 'active'
  AND m.category IN ('thread', 'goal')
  AND (SELECT count(DISTINCT e.created_at::date) FROM memory_events AS e
       WHERE e.user_id = m.user_id AND e.memory_id = m.id
         AND e.action IN ('create', 'refresh')) >= :days
""")


async def near_duplicates(
    sessions: async_sessionmaker[AsyncSession],
    batch: Batch,
    compare_since: Sequence[datetime],
    *,
    min_similarity: float,
) -> tuple[list[tuple[int, int, float]], dict[int, MemoryItem]]:
    """Pairs (a, b, similarity) of each person's live memories at least `min_similarity`
    alike, those made since `compare_since` against all, most similar first; and the
    memories in them, by id."""
    params = {
        "ids": list(batch.ids),
        "since": list(compare_since),
        "max_distance": 1 - min_similarity,
    }
    async with sessions() as db:
        pairs = [(r.a, r.b, float(r.similarity)) for r in await db.execute(_PAIRS, params)]
        ids = {i for a, b, _ in pairs for i in (a, b)}
        rows = list(await db.scalars(select(Memory).where(Memory.id.in_(ids)))) if ids else []
    return pairs, {r.id: to_item(r) for r in rows}


async def memories_by_ids(
    sessions: async_sessionmaker[AsyncSession], user_id: int, ids: Sequence[int]
) -> dict[int, MemoryItem]:
    """One person's memories (any version) by id; ids of anyone else's are not found."""
    async with sessions() as db:
        rows = await db.scalars(
            select(Memory).where(Memory.user_id == user_id, Memory.id.in_(list(ids)))
        )
        return {r.id: to_item(r) for r in rows}


async def fold_memories(
    sessions: async_sessionmaker[AsyncSession],
    folds: Sequence[tuple[int, int, float]],
    *,
    now: datetime,
) -> int:
    """Fold each (loser, keeper, similarity) loser into its keeper at once: the loser's
    version ends, superseded by the keeper; how many were folded."""
    if not folds:
        return 0
    params = {
        "losers": [loser for loser, _, _ in folds],
        "keepers": [keeper for _, keeper, _ in folds],
        "similarity": [similarity for _, _, similarity in folds],
        "now": now,
    }
    async with sessions.begin() as db:
        result = await db.execute(_FOLD, params)
    return int(getattr(result, "rowcount", 0) or 0)


async def merge_as_new_version(
    memories: SqlMemories,
    keeper: MemoryItem,
    loser: MemoryItem,
    candidate: Candidate,
    *,
    embedding: list[float] | None,
    similarity: float,
    now: datetime,
) -> bool:
    """`candidate` (the merged text) becomes the keeper's new version and the loser is
    folded into it, in one transaction; False (nothing changed) when either was changed
    meanwhile."""
    async with memories.batch(keeper.user_id) as batch:
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
            similarity=round(similarity, 3),
        )
    return True


async def recurring(
    sessions: async_sessionmaker[AsyncSession],
    batch: Batch,
    *,
    min_sessions: int,
    min_days: int,
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """What keeps coming back: (thread, person, short id of its most important live thread
    or goal memory) of open threads seen in `min_sessions` sessions (none with a forgotten
    memory); and (person, short id) of thread or goal memories mentioned again since the
    batch's last patrol and on `min_days` days in all."""
    async with sessions() as db:
        threads = (
            await db.execute(_RECURRING_THREADS, {"ids": list(batch.ids), "sessions": min_sessions})
        ).all()
        memories = (
            await db.execute(
                _RECURRING,
                {"ids": list(batch.ids), "since": list(batch.since), "days": min_days},
            )
        ).all()
    return [(t, u, s) for t, u, s in threads], [(u, s) for u, s in memories]


async def promote_to_core(
    memories: SqlMemories, user_id: int, short_id: int, *, thread_id: int | None = None
) -> int:
    """A core version of an active memory (the old one stays in history); with
    `thread_id`, that thread is promoted. 1 when promoted, 0 when it changed meanwhile."""
    async with memories.batch(user_id) as batch:
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
