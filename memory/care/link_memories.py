"""Reconciling memories when two people become one (`memory.care.linking`).

Each memory that moved is compared with the keeper's own memories of the same category:
the same text (or nearly the same meaning) is one memory told twice, so one is folded
into the other as a merge (kept in history, its source messages joined to the one that
stays, as the nightly patrol folds duplicates); a related core memory that says
something else (a city, a job: close in meaning, or the same words around another
value) may contradict it, so both stay, each marked with a
`link_conflict` event, and the person is shown the pairs to settle in `/memory`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.memory_events import record_event
from memory.store.tables import Memory

DUPLICATE_SIMILARITY = 0.92
CONFLICT_SIMILARITY = 0.6
CANDIDATE_SIMILARITY = 0.3
"""Pairs below this are not compared at all (each moved memory meets its few nearest)."""
NEAREST = 3
SAME_FRAME = 0.6
"""Two statements whose words are the same at both ends for this share of the longer one
differ in a value ("I live in Paris" / "I live in Berlin")."""

_PAIRS = text("""
SELECT n.id AS a, o.id AS b, o.same, o.similarity
FROM memories AS n
CROSS JOIN LATERAL (
    SELECT x.id, x.content_hash = n.content_hash AS same,
           coalesce(1 - (x.embedding <=> n.embedding), 0) AS similarity
    FROM memories AS x
    WHERE x.user_id = n.user_id AND x.category = n.category AND x.short_id < :moved_from
      AND x.valid_until IS NULL AND x.status IN ('active', 'dying')
      AND (n.category <> 'event' OR n.event_at IS NOT DISTINCT FROM x.event_at)
      AND (x.content_hash = n.content_hash OR (x.embedding <=> n.embedding) <= :max_distance)
    ORDER BY x.content_hash = n.content_hash DESC, x.embedding <=> n.embedding
    LIMIT :nearest
) AS o
WHERE n.user_id = :uid AND n.short_id >= :moved_from
  AND n.valid_until IS NULL AND n.status IN ('active', 'dying')
""")

_FOLD = text("""
WITH pairs AS (
    SELECT * FROM unnest(CAST(:losers AS bigint[]), CAST(:keepers AS bigint[]))
        AS x(loser, keeper)
),
gone AS (
    UPDATE memories AS m SET valid_until = :now, superseded_by = pairs.keeper
    FROM pairs WHERE m.id = pairs.loser AND m.valid_until IS NULL
    RETURNING m.id, m.source_message_ids, pairs.keeper
)
UPDATE memories AS k
SET source_message_ids = ARRAY(
    SELECT DISTINCT unnest(k.source_message_ids || gone.source_message_ids) ORDER BY 1)
FROM gone WHERE k.id = gone.keeper
""")


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two memories, one from each account, that may say different things."""

    short_id: int
    content: str
    other_short_id: int
    other_content: str


@dataclass(frozen=True, slots=True)
class Reconciled:
    """How many moved memories were folded into one already known, and the conflicts."""

    merged: int
    conflicts: tuple[Conflict, ...]


def _rank(row: Memory) -> tuple[bool, bool, float, float]:
    """Which of two copies stays: pinned, then said explicitly, more confident, older."""
    return (row.pinned, row.source == "user", row.confidence, -row.created_at.timestamp())


def same_frame(a: str, b: str) -> bool:
    """Whether two statements say the same thing of a different value: most of their
    words agree from the start and from the end, and some in between do not."""
    x, y = a.lower().rstrip(".!").split(), b.lower().rstrip(".!").split()
    if x == y or not x or not y:
        return False
    head = 0
    while head < min(len(x), len(y)) and x[head] == y[head]:
        head += 1
    tail = 0
    while tail < min(len(x), len(y)) - head and x[-1 - tail] == y[-1 - tail]:
        tail += 1
    return (head + tail) / max(len(x), len(y)) >= SAME_FRAME


def _conflicting(a: Memory, b: Memory, similarity: float) -> bool:
    """Two core memories that may not both be true."""
    if a.tier != "core" or b.tier != "core":
        return False
    return similarity >= CONFLICT_SIMILARITY or same_frame(a.content, b.content)


def _plan(
    pairs: Sequence[tuple[int, int, bool, float]], rows: dict[int, Memory]
) -> tuple[list[tuple[Memory, Memory, float]], list[tuple[Memory, Memory]]]:
    """Folds (keeper, loser, similarity) and conflicts, each memory in at most one."""
    used: set[int] = set()
    folds: list[tuple[Memory, Memory, float]] = []
    conflicts: list[tuple[Memory, Memory]] = []
    for a, b, same, similarity in sorted(pairs, key=lambda p: (not p[2], -p[3])):
        if a in used or b in used:
            continue
        keeper, loser = sorted((rows[a], rows[b]), key=_rank, reverse=True)
        duplicate = same or (
            similarity >= DUPLICATE_SIMILARITY and not (loser.pinned or loser.source == "user")
        )
        if duplicate:
            folds.append((keeper, loser, 1.0 if same else similarity))
        elif _conflicting(rows[a], rows[b], similarity):
            conflicts.append((rows[b], rows[a]))  # the keeper's own first
        else:
            continue
        used.update((a, b))
    return folds, conflicts


async def reconcile_moved(
    db: AsyncSession, *, user_id: int, moved_from: int, now: datetime
) -> Reconciled:
    """Fold duplicates among the memories that moved (short ids from `moved_from` on)
    and the keeper's own (the short ids before), and mark the pairs that may contradict
    each other; in the caller's transaction."""
    params = {
        "uid": user_id,
        "moved_from": moved_from,
        "max_distance": 1 - CANDIDATE_SIMILARITY,
        "nearest": NEAREST,
    }
    pairs = [
        (r.a, r.b, bool(r.same), float(r.similarity)) for r in await db.execute(_PAIRS, params)
    ]
    ids = {i for a, b, _, _ in pairs for i in (a, b)}
    rows = {r.id: r for r in await db.scalars(select(Memory).where(Memory.id.in_(ids)))}
    folds, conflicts = _plan(pairs, rows)
    if folds:
        await db.execute(
            _FOLD,
            {
                "losers": [loser.id for _, loser, _ in folds],
                "keepers": [keeper.id for keeper, _, _ in folds],
                "now": now,
            },
        )
    for keeper, loser, similarity in folds:
        await record_event(
            db,
            row=loser,
            action="merge",
            actor="user",
            now=now,
            into_short_id=keeper.short_id,
            into_id=keeper.id,
            similarity=round(similarity, 3),
            linked=True,
        )
    for mine, theirs in conflicts:
        for row, other in ((mine, theirs), (theirs, mine)):
            await record_event(
                db, row=row, action="link_conflict", actor="user", now=now, with_id=other.id
            )
    return Reconciled(
        len(folds),
        tuple(Conflict(a.short_id, a.content, b.short_id, b.content) for a, b in conflicts),
    )
