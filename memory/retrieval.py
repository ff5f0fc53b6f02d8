"""Hybrid recall: what this person said or what is remembered about them, for one query.

One SQL statement ranks the person's own rows two ways, exactly (no approximate index):
pgvector cosine similarity and BM25 over the english tsvector, with IDF taken from the
person's own rows and OR semantics over the query's stemmed, stop-word-free terms. A
message's scores also borrow from its neighbours in the same session, because a reply
("yes, it went great") is about what the turn before it said. Python then fuses the
ranks by reciprocal rank, weights memories by importance, confidence and recency, and
puts the conversation log below memories.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import structlog
from pgvector.sqlalchemy import Vector
from sqlalchemy import BigInteger, bindparam, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.ports import Embedder
from memory.tables import Memory

log = structlog.get_logger(__name__)

Mode = Literal["hybrid", "text", "vector"]
Kind = Literal["memory", "message"]
MAX_QUERY_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Tuning:
    """The knobs of ranking and fusion; message defaults measured on LoCoMo (bench/)."""

    rrf_k: float = 60.0
    min_similarity: float = 0.2  # cosine below this is not a vector match at all
    text_weight: float = 1.0
    memory_vector_weight: float = 1.0
    message_vector_weight: float = 0.25
    message_weight: float = 0.6
    neighbour_1: float = 0.5
    neighbour_2: float = 0.25
    bm25_k1: float = 0.9
    bm25_b: float = 0.4
    recency_half_life_days: float = 60.0
    recency_floor: float = 0.7
    candidates: int = 50


DEFAULT_TUNING = Tuning()


@dataclass(frozen=True, slots=True)
class Recalled:
    """One recalled memory or past message, with its fused score."""

    kind: Kind
    id: int
    content: str
    score: float
    created_at: datetime
    short_id: int | None = None
    tier: str | None = None
    category: str | None = None
    importance: float | None = None
    event_at: datetime | None = None
    role: str | None = None
    platform_message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A row as ranked by SQL: its rank in each list (1 = best; None = not in that list)."""

    kind: Kind
    id: int
    vector_rank: int | None
    text_rank: int | None
    content: str
    created_at: datetime
    short_id: int | None = None
    tier: str | None = None
    category: str | None = None
    importance: float | None = None
    confidence: float | None = None
    event_at: datetime | None = None
    role: str | None = None
    platform_message_id: str | None = None


def rrf_score(ranks: Iterable[tuple[int | None, float]], k: float) -> float:
    """Reciprocal rank fusion: the sum of weight / (k + rank) over the lists a row is in."""
    return float(sum(weight / (k + rank) for rank, weight in ranks if rank is not None))


def recency_factor(
    created_at: datetime, now: datetime, half_life_days: float, floor: float
) -> float:
    """From 1 (just now) down towards `floor`, halving the distance every half-life."""
    age_days = max(0.0, (now - created_at).total_seconds() / 86400.0)
    return floor + (1.0 - floor) * math.pow(0.5, age_days / half_life_days)


def memory_factor(importance: float, confidence: float) -> float:
    """Importance 1–10 maps to 0.55–1.0, confidence 0–1 to 0.5–1.0; multiplied."""
    clamped = min(10.0, max(1.0, importance))
    return (0.5 + clamped / 20.0) * (0.5 + 0.5 * min(1.0, max(0.0, confidence)))


def fused_score(candidate: Candidate, *, mode: Mode, tuning: Tuning, now: datetime) -> float:
    """A candidate's final score: RRF over the lists `mode` uses, times its weights."""
    is_message = candidate.kind == "message"
    lists = []
    if mode in ("hybrid", "vector"):
        weight = tuning.message_vector_weight if is_message else tuning.memory_vector_weight
        lists.append((candidate.vector_rank, weight if mode == "hybrid" else 1.0))
    if mode in ("hybrid", "text"):
        lists.append((candidate.text_rank, tuning.text_weight))
    score = rrf_score(lists, tuning.rrf_k)
    if is_message:
        return score * tuning.message_weight
    recency = recency_factor(
        candidate.created_at, now, tuning.recency_half_life_days, tuning.recency_floor
    )
    return score * recency * memory_factor(candidate.importance or 1.0, candidate.confidence or 0)


def fuse(
    candidates: Iterable[Candidate],
    *,
    k: int,
    mode: Mode = "hybrid",
    tuning: Tuning = DEFAULT_TUNING,
    now: datetime,
) -> list[Recalled]:
    """The `k` best candidates by fused score, best first; ties go to the newer row."""
    scored = [(fused_score(c, mode=mode, tuning=tuning, now=now), c) for c in candidates]
    scored = [(s, c) for s, c in scored if s > 0.0]
    scored.sort(key=lambda pair: (-pair[0], -pair[1].created_at.timestamp(), -pair[1].id))
    return [_recalled(c, s) for s, c in scored[:k]]


def _recalled(c: Candidate, score: float) -> Recalled:
    return Recalled(
        kind=c.kind,
        id=c.id,
        content=c.content,
        score=score,
        created_at=c.created_at,
        short_id=c.short_id,
        tier=c.tier,
        category=c.category,
        importance=c.importance,
        event_at=c.event_at,
        role=c.role,
        platform_message_id=c.platform_message_id,
    )


def clean_query(query: str) -> str:
    """The query as safe text: no NUL bytes (PostgreSQL rejects them), bounded length."""
    return query.replace("\x00", " ")[:MAX_QUERY_CHARS]


# The statement is assembled from these constant fragments only; the query text, its
# vector and every id travel as bound parameters. The query's terms are its english
# lexemes (stemmed, no stop words); `any_term` ORs them, each quoted as a literal lexeme,
# so no user text is ever parsed as tsquery syntax.
_QUERY = r"""
q_terms AS MATERIALIZED (
    SELECT coalesce(array_agg(DISTINCT lexeme), '{}') AS lexemes
    FROM unnest(to_tsvector('english', :qtext))
),
q AS MATERIALIZED (
    SELECT CAST(:qvec AS vector) AS vec, lexemes,
           CAST(nullif(array_to_string(ARRAY(
               SELECT '''' || replace(replace(l, '\', '\\'), '''', '''''') || ''''
               FROM unnest(lexemes) AS l), ' | '), '') AS tsquery) AS any_term
    FROM q_terms
)"""

_BM25 = """
{p}_stats AS (
    SELECT count(*) AS n, greatest(avg(length(tsv)), 1) AS avgdl,
           CAST(:k1 AS float8) AS k1, CAST(:b AS float8) AS b,
           CAST(:min_sim AS float8) AS min_sim
    FROM {p}_docs
),
{p}_hits AS (
    SELECT d.id, t.lexeme, coalesce(cardinality(t.positions), 1) AS tf, length(d.tsv) AS dl
    FROM {p}_docs AS d CROSS JOIN q CROSS JOIN LATERAL unnest(d.tsv) AS t
    WHERE d.tsv @@ q.any_term AND t.lexeme = ANY (q.lexemes)
),
{p}_bm25 AS (
    SELECT h.id,
           sum(ln(1 + (s.n - f.df + 0.5) / (f.df + 0.5))
               * h.tf * (s.k1 + 1) / (h.tf + s.k1 * (1 - s.b + s.b * h.dl / s.avgdl))) AS score
    FROM {p}_hits AS h
    JOIN (SELECT lexeme, count(*) AS df FROM {p}_hits GROUP BY lexeme) AS f USING (lexeme)
    CROSS JOIN {p}_stats AS s
    GROUP BY h.id
)"""

_MESSAGES = (
    """
m_docs AS MATERIALIZED (
    SELECT m.id, m.session_id, m.tsv, coalesce(1 - (m.embedding <=> q.vec), -1) AS v
    FROM messages AS m CROSS JOIN q
    WHERE m.user_id = :uid AND m.status <> 'apology'
),"""
    + _BM25.format(p="m")
    + """,
m_scored AS (
    SELECT d.id, d.session_id, d.v, coalesce(b.score, 0) AS t
    FROM m_docs AS d LEFT JOIN m_bm25 AS b USING (id)
),
m_spread AS (
    SELECT id, v,
           t + CAST(:n1 AS float8) * (coalesce(lag(t, 1) OVER w, 0)
                                      + coalesce(lead(t, 1) OVER w, 0))
             + CAST(:n2 AS float8) * (coalesce(lag(t, 2) OVER w, 0)
                                      + coalesce(lead(t, 2) OVER w, 0)) AS t
    FROM m_scored WINDOW w AS (PARTITION BY session_id ORDER BY id)
),
m_ranked AS (
    SELECT id,
           CASE WHEN v >= s.min_sim THEN row_number() OVER (ORDER BY v DESC, id DESC) END
               AS vrank,
           CASE WHEN t > 0 THEN row_number() OVER (ORDER BY t DESC, id DESC) END AS trank
    FROM m_spread CROSS JOIN m_stats AS s WHERE id <> ALL (:exclude)
)"""
)

_MEMORIES = (
    """
k_docs AS MATERIALIZED (
    SELECT k.id, k.tsv, coalesce(1 - (k.embedding <=> q.vec), -1) AS v
    FROM memories AS k CROSS JOIN q
    WHERE k.user_id = :uid AND k.valid_until IS NULL AND k.status IN ('active', 'dying')
),"""
    + _BM25.format(p="k")
    + """,
k_ranked AS (
    SELECT d.id,
           CASE WHEN d.v >= s.min_sim
                THEN row_number() OVER (ORDER BY d.v DESC, d.id DESC) END AS vrank,
           CASE WHEN b.score > 0
                THEN row_number() OVER (ORDER BY coalesce(b.score, 0) DESC, d.id DESC) END AS trank
    FROM k_docs AS d LEFT JOIN k_bm25 AS b USING (id) CROSS JOIN k_stats AS s
)"""
)

_SELECT_MESSAGES = """
SELECT 'message' AS kind, m.id, r.vrank AS vector_rank, r.trank AS text_rank,
       m.content, m.created_at,
       NULL::int AS short_id, NULL AS tier, NULL AS category, NULL::float AS importance,
       NULL::float AS confidence, NULL::timestamptz AS event_at, m.role, m.platform_message_id
FROM m_ranked AS r JOIN messages AS m ON m.id = r.id
WHERE m.user_id = :uid AND (r.vrank <= :n OR r.trank <= :n)"""

_SELECT_MEMORIES = """
SELECT 'memory' AS kind, k.id, r.vrank AS vector_rank, r.trank AS text_rank,
       k.content, k.created_at,
       k.short_id, k.tier, k.category, k.importance, k.confidence, k.event_at,
       NULL AS role, NULL AS platform_message_id
FROM k_ranked AS r JOIN memories AS k ON k.id = r.id
WHERE k.user_id = :uid AND (r.vrank <= :n OR r.trank <= :n)"""


def _statement(*, messages: bool, memories: bool, dim: int) -> Any:
    ctes = [_QUERY]
    selects = []
    if messages:
        ctes.append(_MESSAGES)
        selects.append(_SELECT_MESSAGES)
    if memories:
        ctes.append(_MEMORIES)
        selects.append(_SELECT_MEMORIES)
    sql = "WITH " + ",".join(ctes) + "\n" + "\nUNION ALL".join(selects)
    binds = [bindparam("qvec", type_=Vector(dim))]
    if messages:
        binds.append(bindparam("exclude", type_=ARRAY(BigInteger)))
    return text(sql).bindparams(*binds)


async def candidates(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    query: str,
    query_vector: Sequence[float],
    messages: bool = True,
    memories: bool = True,
    exclude_message_ids: Collection[int] = (),
    per_list: int = 50,
    tuning: Tuning = DEFAULT_TUNING,
) -> list[Candidate]:
    """The person's best `per_list` rows by vector and by text, with both ranks; one query."""
    if not (messages or memories):
        return []
    statement = _statement(messages=messages, memories=memories, dim=len(query_vector))
    params = {
        "uid": user_id,
        "qvec": list(query_vector),
        "qtext": clean_query(query),
        "exclude": sorted({int(i) for i in exclude_message_ids}),
        "n": per_list,
        "k1": tuning.bm25_k1,
        "min_sim": tuning.min_similarity,
        "b": tuning.bm25_b,
        "n1": tuning.neighbour_1,
        "n2": tuning.neighbour_2,
    }
    if not messages:
        params = {key: v for key, v in params.items() if key not in ("exclude", "n1", "n2")}
    async with sessions() as db:
        rows = (await db.execute(statement, params)).mappings().all()
    return [Candidate(**row) for row in rows]


async def recall(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    *,
    user_id: int,
    query: str,
    k: int = 10,
    now: datetime,
    include_messages: bool = True,
    include_memories: bool = True,
    exclude_message_ids: Collection[int] = (),
    mode: Mode = "hybrid",
    tuning: Tuning = DEFAULT_TUNING,
) -> list[Recalled]:
    """The `k` memories and past messages of this person most relevant to `query`."""
    cleaned = clean_query(query)
    if k <= 0 or not cleaned.strip() or not (include_messages or include_memories):
        return []
    vector = (await embedder.embed([cleaned]))[0]
    found = await candidates(
        sessions,
        user_id=user_id,
        query=cleaned,
        query_vector=[float(x) for x in vector],
        messages=include_messages,
        memories=include_memories,
        exclude_message_ids=exclude_message_ids,
        per_list=max(tuning.candidates, k),
        tuning=tuning,
    )
    result = fuse(found, k=k, mode=mode, tuning=tuning, now=now)
    log.debug("memory.recalled", user_id=user_id, candidates=len(found), returned=len(result))
    return result


async def mark_recalled(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    memory_ids: Collection[int],
    now: datetime,
) -> int:
    """Count a recall of these memories of this person (revives them in the patrol)."""
    if not memory_ids:
        return 0
    async with sessions.begin() as db:
        result = await db.execute(
            update(Memory)
            .where(Memory.user_id == user_id, Memory.id.in_(list(memory_ids)))
            .values(
                recall_count=Memory.recall_count + 1,
                last_recalled_at=now,
                sessions_since_recall=0,
            )
        )
    return int(getattr(result, "rowcount", 0))
