"""Hybrid recall: what this person said or what is remembered about them, for one query.

One SQL statement ranks the person's own rows, exactly (no approximate index), in up to
six lists: pgvector cosine similarity; BM25 over the english tsvector, with IDF taken
from the person's own rows and OR semantics over the query's stemmed, stop-word-free
terms; the rows from the time the query names ("last summer", "in May": `when.py`), by
cosine; for a message, its session, by BM25 of the session's summary among the
person's summaries, and by the cosine of the summary's best sentence (each sentence is
embedded on its own, `memory.store.summary_units`; in both, the best sessions' turns
all become candidates: a summary is a unit of recall beside single turns); and, on
the second pass, the messages using names the first pass's best messages (one a
session) used (`entities.py`: the second hop). A time told by an event ("after the
move") is anchored on the first pass's message telling of it (`anchor.py`) and ranks
the candidates in its window as the time list. A message's text scores also borrow from its
neighbours in the same session, because a reply ("yes, it went great") is about what
the turn before it said. Message cosines are taken after
removing the (shrunk) mean vector of the person's latest messages, and every row also
reports its coverage: the IDF-weighted share of the query's terms found in it (and, for
a message, in the turns either side). Python then fuses the ranks by weighted
reciprocal rank plus coverage, weights memories by importance, confidence and recency,
and puts the conversation log below memories. The second pass also adds pseudo-
relevance feedback: the best few messages lend their most distinctive terms to the
query at a lower weight and the statement runs once more, by words only. A question
asking for several things spreads its final pick over sessions (`spread.py`).
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
from collections.abc import Awaitable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

import structlog
from sqlalchemy import BigInteger, DateTime, bindparam, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.anchor import event_time, event_window, window_ranks
from memory.recall.embeddings import EmbeddingError
from memory.recall.entities import linked_names
from memory.recall.life_cycle import Life
from memory.recall.spread import asks_for_several, one_per_group, spread
from memory.recall.when import SLACK, Window, event_named, time_window
from memory.store.binary_vector import BinaryVector
from memory.store.ports import Embedder
from memory.store.tables import Memory

log = structlog.get_logger(__name__)

Mode = Literal["hybrid", "text", "vector"]
Kind = Literal["memory", "message"]
MAX_QUERY_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Tuning:
    """The knobs of ranking and fusion; message defaults measured on LoCoMo (bench/)."""

    rrf_k: float = 60.0
    min_similarity: float = 0.2  # a message's cosine below this is not a vector match at all
    memory_min_similarity: float = 0.3  # a memory's (MiniLM's scale; WordLlama's was 0.2)
    text_weight: float = 1.0
    memory_vector_weight: float = 1.0
    message_vector_weight: float = 1.0  # MiniLM; WordLlama's static vectors measured best at 0.35
    message_weight: float = 0.6
    neighbour_1: float = 0.5
    neighbour_2: float = 0.25
    bm25_k1: float = 0.9
    bm25_b: float = 0.4
    recency_half_life_days: float = 60.0
    recency_floor: float = 0.7
    candidates: int = 50
    centre_vectors: bool = True  # message cosine after removing the person's mean vector
    centre_prior: float = 20.0  # the mean is shrunk by n / (n + prior) for short histories
    centre_window: int = 256  # the mean of the person's latest messages: a bounded cost
    coverage_weight: float = 0.3  # in units of a first-place RRF vote
    feedback_docs: int = 4  # pseudo-relevance feedback from this many best messages; 0 = off
    feedback_terms: int = 10
    feedback_weight: float = 0.2  # of the best expansion term, relative to a query term
    window_weight: float = 1.0  # rows from the time the query names ("last summer"); 0 = off
    session_weight: float = 1.0  # a turn's session, by how well its summary matches; 0 = off
    session_units: int = 3  # every turn of this many best-matching sessions is a candidate
    unit_weight: float = 1.5  # a turn's session, by its summary's best sentence (cosine)
    unit_sessions: int = 3  # every turn of this many sessions so ranked is a candidate
    unit_window: int = 400  # the person's latest summaries so ranked: a bounded cost
    entity_docs: int = 3  # the second hop follows names in this many best messages; 0 = off
    entity_names: int = 6
    entity_weight: float = 0.5  # messages ranked by the names so found, as one more list
    spread_decay: float = 0.97  # a question asking for several things: per turn of a session
    spread_pool: int = 60  # already chosen, in the final pick from this many best; 1 = off
    event_days: float = 60.0  # "after the move": the window from the event's message; 0 = off


DEFAULT_TUNING = Tuning()
# The default before MiniLM, kept for the bench's "previous" column.
PREVIOUS_TUNING = Tuning(
    message_vector_weight=0.35,
    memory_min_similarity=0.2,
    window_weight=0.0,
    session_weight=0.0,
    unit_weight=0.0,
    entity_docs=0,
    spread_decay=1.0,
    event_days=0.0,
)


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
    life: Life | None = None
    """A memory's place in its life cycle (None for a message)."""
    thread_id: int | None = None
    """The thread a memory belongs to, if any (None for a message)."""


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
    coverage: float = 0.0
    window_rank: int | None = None  # among rows from the time the query names, by cosine
    session_rank: int | None = None  # its session's summary among the person's summaries
    unit_rank: int | None = None  # its session by its summary's best sentence, by cosine
    entity_rank: int | None = None  # by the names it shares with the first hop's best rows
    session_id: int | None = None  # a message's session (None for a memory)
    status: str | None = None
    expires_at: datetime | None = None
    unsure: bool | None = None
    last_confirmed_at: datetime | None = None
    thread_id: int | None = None  # a memory's thread (None for a message or a lone memory)


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
    if mode == "hybrid":
        lists.append((candidate.window_rank, tuning.window_weight))
        lists.append((candidate.session_rank, tuning.session_weight))
        lists.append((candidate.unit_rank, tuning.unit_weight))
        lists.append((candidate.entity_rank, tuning.entity_weight))
    score = rrf_score(lists, tuning.rrf_k)
    if score > 0.0 and mode != "vector":
        score += tuning.coverage_weight * candidate.coverage / (tuning.rrf_k + 1)
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
    several: bool = False,
) -> list[Recalled]:
    """The `k` best candidates by fused score, best first; ties go to the newer row.
    With `several` (the question asks for several things: `spread.asks_for_several`),
    the pick spreads over sessions (`spread.spread`, by `tuning.spread_decay`)."""
    scored = [(fused_score(c, mode=mode, tuning=tuning, now=now), c) for c in candidates]
    scored = [(s, c) for s, c in scored if s > 0.0]
    scored.sort(key=lambda pair: (-pair[0], -pair[1].created_at.timestamp(), -pair[1].id))
    if several:
        scored = spread(
            scored,
            k=k,
            decay=tuning.spread_decay,
            group=lambda c: c.session_id,
            pool=tuning.spread_pool,
        )
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
        life=None if c.kind == "message" else life_of(c),
        thread_id=c.thread_id,
    )


def life_of(c: Candidate) -> Life:
    """A memory candidate's life-cycle columns."""
    return Life(
        tier=c.tier or "core",
        status=c.status or "active",
        confidence=c.confidence if c.confidence is not None else 1.0,
        unsure=bool(c.unsure),
        created_at=c.created_at,
        event_at=c.event_at,
        expires_at=c.expires_at,
        last_confirmed_at=c.last_confirmed_at,
    )


def clean_query(query: str) -> str:
    """The query as safe text: no NUL bytes (PostgreSQL rejects them), bounded length."""
    return query.replace("\x00", " ")[:MAX_QUERY_CHARS]


# The statement is assembled from these constant fragments only; the query text, its
# vector and every id travel as bound parameters. The query's terms are its english
# lexemes (stemmed, no stop words); `any_term` ORs them, each quoted as a literal lexeme,
# so no user text is ever parsed as tsquery syntax. On the feedback pass the lexemes of
# the `:feedback` messages (the person's own, by id) join as candidate expansion terms;
# each side then keeps its `:fb_terms` most distinctive ones (tf / length times IDF),
# weighted `:fb_weight` relative to the best of them, and drops the rest.
_QUERY = r"""
q_terms AS MATERIALIZED (
    SELECT lexemes, ARRAY(SELECT DISTINCT e.lexeme
                          FROM unnest(to_tsvector('english', :entities)) AS e
                          WHERE e.lexeme <> ALL (lexemes)) AS ent_lexemes
    FROM (SELECT coalesce(array_agg(DISTINCT lexeme), '{}') AS lexemes
          FROM unnest(to_tsvector('english', :qtext))) AS asked
),
fb_terms AS MATERIALIZED (
    SELECT t.lexeme, sum(coalesce(cardinality(t.positions), 1)
                         / CAST(greatest(length(f.tsv), 1) AS float8)) AS tfn
    FROM messages AS f CROSS JOIN q_terms AS qt CROSS JOIN LATERAL unnest(f.tsv) AS t
    WHERE f.user_id = :uid AND f.id = ANY (:feedback) AND t.lexeme <> ALL (qt.lexemes)
      AND t.lexeme <> ALL (qt.ent_lexemes) AND f.status NOT IN ('apology', 'forgotten', 'command')
    GROUP BY t.lexeme
),
q AS MATERIALIZED (
    SELECT CAST(:qvec AS vector) AS vec, lexemes, ent_lexemes, all_lexemes,
           CAST(nullif(array_to_string(ARRAY(
               SELECT '''' || replace(replace(l, '\', '\\'), '''', '''''') || ''''
               FROM unnest(all_lexemes) AS l), ' | '), '') AS tsquery) AS any_term
    FROM (SELECT lexemes, ent_lexemes,
                 lexemes || ent_lexemes || ARRAY(SELECT lexeme FROM fb_terms) AS all_lexemes
          FROM q_terms) AS qa
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
    FROM {p}_docs AS d CROSS JOIN q
    CROSS JOIN LATERAL unnest(ts_filter(setweight(d.tsv, 'A', q.all_lexemes), '{{a}}')) AS t
    WHERE d.tsv @@ q.any_term
),
{p}_idf AS (
    SELECT l AS lexeme, l = ANY (q.lexemes) AS original, l = ANY (q.ent_lexemes) AS entity,
           ln(1 + (s.n - coalesce(f.df, 0) + 0.5) / (coalesce(f.df, 0) + 0.5)) AS idf
    FROM q CROSS JOIN unnest(q.all_lexemes) AS l CROSS JOIN {p}_stats AS s
    LEFT JOIN (SELECT lexeme, count(*) AS df FROM {p}_hits GROUP BY lexeme) AS f
           ON f.lexeme = l
),
{p}_expansion AS (
    SELECT i.lexeme, i.idf, fb.tfn * i.idf AS strength,
           row_number() OVER (ORDER BY fb.tfn * i.idf DESC, i.lexeme) AS place
    FROM {p}_idf AS i JOIN fb_terms AS fb USING (lexeme)
    WHERE NOT i.original AND NOT i.entity
),
{p}_weights AS (
    SELECT lexeme, idf, CAST(1 AS float8) AS weight FROM {p}_idf WHERE original
    UNION ALL
    SELECT lexeme, idf, CAST(:fb_weight AS float8) * strength / max(strength) OVER ()
    FROM {p}_expansion WHERE place <= :fb_terms
),
{p}_linked AS (
    SELECT h.id, row_number() OVER (ORDER BY sum(i.idf) DESC, h.id DESC) AS erank
    FROM {p}_hits AS h JOIN {p}_idf AS i USING (lexeme)
    WHERE i.entity
    GROUP BY h.id
),
{p}_bm25 AS (
    SELECT h.id,
           sum(w.weight * w.idf
               * h.tf * (s.k1 + 1) / (h.tf + s.k1 * (1 - s.b + s.b * h.dl / s.avgdl))) AS score,
           array_agg(h.lexeme) FILTER (WHERE w.weight = 1) AS matched
    FROM {p}_hits AS h JOIN {p}_weights AS w USING (lexeme) CROSS JOIN {p}_stats AS s
    GROUP BY h.id
),
{p}_query_idf AS (
    SELECT greatest(sum(idf), 1e-9) AS total FROM {p}_idf WHERE original
)"""

# Centred cosine without vector arithmetic: with unit rows d, q and the (shrunk) mean m,
# cos(d - m, q - m) = (d.q - d.m - q.m + m.m) / sqrt((1 - 2 d.m + m.m)(1 - 2 q.m + m.m)).
_MESSAGE_CENTRE = """
m_mean AS MATERIALIZED (
    SELECT CAST(:centre AS float8) * count(embedding) / (count(embedding) + :centre_prior)
               AS shrink, avg(embedding) AS mu
    FROM (SELECT embedding FROM messages
          WHERE user_id = :uid AND status NOT IN ('apology', 'forgotten')
          ORDER BY id DESC LIMIT :centre_window) AS recent
),
m_centre AS MATERIALIZED (
    SELECT c.shrink, coalesce(-(q.vec <#> c.mu), 0) * c.shrink AS qm,
           coalesce(-(c.mu <#> c.mu), 0) * c.shrink * c.shrink AS mm
    FROM m_mean AS c CROSS JOIN q
),"""

_MESSAGE_DOCS = """
m_docs AS MATERIALIZED (
    SELECT m.id, m.session_id, m.tsv,
           coalesce(m.created_at >= :w_start AND m.created_at < :w_end, false) AS inw{doc_vectors}
    FROM messages AS m{doc_joins}
    WHERE m.user_id = :uid AND m.status NOT IN ('apology', 'forgotten', 'command')
      AND m.session_id IS DISTINCT FROM CAST(:exclude_session AS bigint)
),"""

_MESSAGE_RANKS = """,
m_scored AS (
    SELECT d.id, d.session_id, d.inw,{scored_vectors}
           coalesce(b.score, 0) AS t, coalesce(b.matched, '{{}}') AS matched
    FROM m_docs AS d LEFT JOIN m_bm25 AS b USING (id){scored_joins}
),
m_spread AS (
    SELECT id, session_id, inw,{spread_vectors} matched,
           lag(matched, 1, '{{}}') OVER w || lead(matched, 1, '{{}}') OVER w AS near,
           t + CAST(:n1 AS float8) * (coalesce(lag(t, 1) OVER w, 0)
                                      + coalesce(lead(t, 1) OVER w, 0))
             + CAST(:n2 AS float8) * (coalesce(lag(t, 2) OVER w, 0)
                                      + coalesce(lead(t, 2) OVER w, 0)) AS t
    FROM m_scored WINDOW w AS (PARTITION BY session_id ORDER BY id)
),
m_ranked AS (
    SELECT id, {vrank} AS vrank, {wrank} AS wrank, sr.srank, su.svrank, ml.erank,
           CASE WHEN t > 0 THEN row_number() OVER (ORDER BY t DESC, id DESC) END AS trank,
           matched || near AS window_terms
    FROM m_spread LEFT JOIN s_ranked AS sr USING (session_id) LEFT JOIN m_linked AS ml USING (id)
    LEFT JOIN s_units AS su USING (session_id)
    CROSS JOIN m_stats AS s
),
m_top AS MATERIALIZED (
    SELECT r.id, r.vrank, r.trank, r.wrank, r.srank, r.svrank, r.erank,
           coalesce((SELECT sum(i.idf) FROM m_idf AS i
                     WHERE i.original AND i.lexeme = ANY (r.window_terms)), 0) / qi.total
               AS coverage
    FROM m_ranked AS r CROSS JOIN m_query_idf AS qi
    WHERE {kept}
)"""

_WITH_VECTORS = {
    "doc_vectors": """, coalesce(1 - (m.embedding <=> q.vec), -1) AS v,
           coalesce(-(m.embedding <#> q.vec), 0) AS dq,
           coalesce(-(m.embedding <#> c.mu), 0) * c.shrink AS dm""",
    "doc_joins": " CROSS JOIN q CROSS JOIN m_mean AS c",
    "scored_vectors": """ d.v,
           (d.dq - d.dm - c.qm + c.mm)
               / sqrt(greatest((1 - 2 * d.dm + c.mm) * (1 - 2 * c.qm + c.mm), 1e-12)) AS cv,""",
    "scored_joins": " CROSS JOIN m_centre AS c",
    "spread_vectors": " v, cv,",
    "vrank": """CASE WHEN v >= s.min_sim
                THEN row_number() OVER (ORDER BY v >= s.min_sim DESC, cv DESC, id DESC) END""",
    "wrank": """CASE WHEN inw
                THEN row_number() OVER (ORDER BY inw DESC, cv DESC, id DESC) END""",
    "kept": "r.vrank <= :n OR r.trank <= :n OR r.wrank <= :n OR r.srank <= :s_top"
    " OR r.svrank <= :u_top",
}
_WORDS_ONLY = {
    "doc_vectors": "",
    "doc_joins": "",
    "scored_vectors": "",
    "scored_joins": "",
    "spread_vectors": "",
    "vrank": "CAST(NULL AS bigint)",
    "wrank": "CAST(NULL AS bigint)",
    "kept": "r.trank <= :n OR r.srank <= :s_top OR r.svrank <= :u_top OR r.erank <= :n"
    " OR r.id = ANY (:also)",
}


# Session summaries as units: BM25 over the person's summaries (IDF from them), each
# summary's rank lent to the turns of its session as one more ranked list.
_UNITS = """
s_units AS (
    SELECT s.session_id,
           row_number() OVER (ORDER BY max(-(u.vec <#> q.vec)) DESC, s.session_id DESC)
               AS svrank
    FROM (SELECT id AS session_id, summary_vectors FROM sessions
          WHERE user_id = :uid AND summary <> '' AND summary_vectors IS NOT NULL
            AND CAST(:unit_weight AS float8) > 0
          ORDER BY id DESC LIMIT :unit_window) AS s
    CROSS JOIN q CROSS JOIN LATERAL unnest(s.summary_vectors) AS u(vec)
    WHERE vector_dims(u.vec) = vector_dims(q.vec)
    GROUP BY s.session_id
)"""
"""Sessions by their summary's best sentence (cosine to the query's vector)."""


_SUMMARIES = (
    """,
s_docs AS MATERIALIZED (
    SELECT s.id, s.summary_tsv AS tsv FROM sessions AS s
    WHERE s.user_id = :uid AND s.summary <> ''
),"""
    + _BM25.format(p="s")
    + """,
s_ranked AS (
    SELECT id AS session_id, row_number() OVER (ORDER BY score DESC, id DESC) AS srank
    FROM s_bm25 WHERE score > 0
),"""
    + _UNITS
)


def _messages_sql(*, vectors: bool) -> str:
    """The message half: ranked by vector and by words, or (`vectors` off, for the
    feedback pass, whose vector ranks are the first pass's) by words alone, keeping the
    rows `:also` names so their word ranks are known too."""
    parts = _WITH_VECTORS if vectors else _WORDS_ONLY
    return (
        (_MESSAGE_CENTRE if vectors else "")
        + _MESSAGE_DOCS.format(**parts)
        + _BM25.format(p="m")
        + _SUMMARIES
        + _MESSAGE_RANKS.format(**parts)
    )


_MEMORIES = (
    """
k_docs AS MATERIALIZED (
    SELECT k.id, k.tsv, coalesce(1 - (k.embedding <=> q.vec), -1) AS v,
           coalesce(coalesce(k.event_at, k.created_at) >= :w_start
                    AND coalesce(k.event_at, k.created_at) < :w_end, false) AS inw
    FROM memories AS k CROSS JOIN q
    WHERE k.user_id = :uid AND k.valid_until IS NULL AND {k_statuses}
),"""
    + _BM25.format(p="k")
    + """,
k_ranked AS (
    SELECT d.id,
           CASE WHEN d.v >= CAST(:k_min_sim AS float8)
                THEN row_number() OVER (ORDER BY d.v DESC, d.id DESC) END AS vrank,
           CASE WHEN b.score > 0
                THEN row_number() OVER (ORDER BY coalesce(b.score, 0) DESC, d.id DESC) END AS trank,
           CASE WHEN d.inw
                THEN row_number() OVER (ORDER BY d.inw DESC, d.v DESC, d.id DESC) END AS wrank,
           coalesce((SELECT sum(i.idf) FROM k_idf AS i
                     WHERE i.original AND i.lexeme = ANY (b.matched)) / qi.total, 0) AS coverage
    FROM k_docs AS d LEFT JOIN k_bm25 AS b USING (id) CROSS JOIN k_stats AS s
    CROSS JOIN k_query_idf AS qi
)"""
)

_SELECT_MESSAGES = """
SELECT 'message' AS kind, m.id, r.vrank AS vector_rank, r.trank AS text_rank,
       r.wrank AS window_rank, r.srank AS session_rank, r.svrank AS unit_rank,
       r.erank AS entity_rank, m.content, m.created_at,
       NULL::int AS short_id, NULL AS tier, NULL AS category, NULL::float AS importance,
       NULL::float AS confidence, NULL::timestamptz AS event_at, m.role, m.platform_message_id,
       CAST(r.coverage AS float8) AS coverage, NULL AS status, NULL::timestamptz AS expires_at,
       NULL::boolean AS unsure, NULL::timestamptz AS last_confirmed_at, m.session_id,
       NULL::bigint AS thread_id
FROM m_top AS r CROSS JOIN LATERAL (
    SELECT * FROM messages AS one WHERE one.user_id = :uid AND one.id = r.id
) AS m"""

_SELECT_MEMORIES = """
SELECT 'memory' AS kind, k.id, r.vrank AS vector_rank, r.trank AS text_rank,
       r.wrank AS window_rank, NULL::bigint AS session_rank, NULL::bigint AS unit_rank,
       NULL::bigint AS entity_rank, k.content, k.created_at,
       k.short_id, k.tier, k.category, k.importance, k.confidence, k.event_at,
       NULL AS role, NULL AS platform_message_id, CAST(r.coverage AS float8) AS coverage,
       k.status, k.expires_at, k.unsure, k.last_confirmed_at, NULL::bigint AS session_id,
       k.thread_id
FROM k_ranked AS r JOIN memories AS k ON k.id = r.id
WHERE k.user_id = :uid AND (r.vrank <= :n OR r.trank <= :n OR r.wrank <= :n)"""


# The first pass in two halves (`first_pass`): one ranks by words and needs no vector, so
# it runs while the query is being embedded; the other ranks by vector alone once the
# vector is there. Each returns the rows it keeps (with their columns) and, in one more
# row of kind 'ranks', its ranks of every row it ranked at all, so each kept row gets
# its rank in the other half's lists too: together they give what `candidates` gives.
_RANKS_COLUMNS = """,
       CAST(NULL AS bigint[]) AS r_ids, CAST(NULL AS bigint[]) AS r_1,
       CAST(NULL AS bigint[]) AS r_2, CAST(NULL AS bigint[]) AS r_3,
       CAST(NULL AS float8[]) AS r_cov"""
_RANKS_ROW = """
UNION ALL
SELECT 'ranks', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       array_agg(id), {r_1}, {r_2}, {r_3}, {r_cov}
FROM {source}"""


def _with_ranks(select_kept: str, **ranks: str) -> str:
    """`select_kept`'s rows with empty rank columns, then the ranks row."""
    parts = {"r_1": "NULL", "r_2": "NULL", "r_3": "NULL", "r_cov": "NULL"} | ranks
    return (
        "\nSELECT kept.*" + _RANKS_COLUMNS + "\nFROM (" + select_kept + "\n) AS kept"
        + _RANKS_ROW.format(**parts)
    )  # fmt: skip


# Messages by words: the feedback pass's statement, with every ranked row's word, session
# and name ranks and its coverage (a row that only the vector half keeps needs them).
_MESSAGE_WORD_RANKS = """,
m_all AS MATERIALIZED (
    SELECT r.id, r.trank, r.srank, r.erank,
           coalesce((SELECT sum(i.idf) FROM m_idf AS i
                     WHERE i.original AND i.lexeme = ANY (r.window_terms)), 0) / qi.total
               AS coverage
    FROM m_ranked AS r CROSS JOIN m_query_idf AS qi
    WHERE r.trank IS NOT NULL OR r.srank IS NOT NULL OR r.erank IS NOT NULL
       OR cardinality(r.window_terms) > 0
)"""

# Messages by vector: the same centred cosine and the same orders as `_WITH_VECTORS`.
_MESSAGE_VECTOR_RANKS = (
    """
q AS MATERIALIZED (SELECT CAST(:qvec AS vector) AS vec),"""
    + _MESSAGE_CENTRE
    + _UNITS
    + """,
m_docs AS MATERIALIZED (
    SELECT m.id, m.session_id,
           coalesce(m.created_at >= :w_start AND m.created_at < :w_end, false) AS inw,
           coalesce(1 - (m.embedding <=> q.vec), -1) AS v,
           coalesce(-(m.embedding <#> q.vec), 0) AS dq,
           coalesce(-(m.embedding <#> c.mu), 0) * c.shrink AS dm
    FROM messages AS m CROSS JOIN q CROSS JOIN m_mean AS c
    WHERE m.user_id = :uid AND m.status NOT IN ('apology', 'forgotten', 'command')
      AND m.session_id IS DISTINCT FROM CAST(:exclude_session AS bigint)
),
m_all AS MATERIALIZED (
    SELECT id, vrank, wrank, svrank FROM (
        SELECT id, session_id,
               CASE WHEN v >= CAST(:min_sim AS float8)
                    THEN row_number() OVER (ORDER BY v >= CAST(:min_sim AS float8) DESC,
                                                     cv DESC, id DESC) END AS vrank,
               CASE WHEN inw
                    THEN row_number() OVER (ORDER BY inw DESC, cv DESC, id DESC) END AS wrank
        FROM (SELECT d.id, d.session_id, d.inw, d.v,
                     (d.dq - d.dm - c.qm + c.mm)
                         / sqrt(greatest((1 - 2 * d.dm + c.mm) * (1 - 2 * c.qm + c.mm), 1e-12))
                         AS cv
              FROM m_docs AS d CROSS JOIN m_centre AS c) AS scored
    ) AS ranked LEFT JOIN s_units AS su USING (session_id)
    WHERE vrank IS NOT NULL OR wrank IS NOT NULL OR su.svrank IS NOT NULL
),
m_top AS (
    SELECT id, vrank, CAST(NULL AS bigint) AS trank, wrank, CAST(NULL AS bigint) AS srank,
           svrank, CAST(NULL AS bigint) AS erank, CAST(0 AS float8) AS coverage
    FROM m_all WHERE vrank <= :n OR wrank <= :n OR svrank <= :u_top
)"""
)

_MEMORY_WORD_RANKS = (
    """
k_docs AS MATERIALIZED (
    SELECT k.id, k.tsv FROM memories AS k
    WHERE k.user_id = :uid AND k.valid_until IS NULL AND k.status IN ('active', 'dying')
),"""
    + _BM25.format(p="k")
    + """,
k_all AS MATERIALIZED (
    SELECT b.id,
           CASE WHEN b.score > 0 THEN row_number() OVER (ORDER BY b.score DESC, b.id DESC) END
               AS trank,
           coalesce((SELECT sum(i.idf) FROM k_idf AS i
                     WHERE i.original AND i.lexeme = ANY (b.matched)) / qi.total, 0) AS coverage
    FROM k_bm25 AS b CROSS JOIN k_query_idf AS qi
),
k_ranked AS (
    SELECT id, CAST(NULL AS bigint) AS vrank, trank, CAST(NULL AS bigint) AS wrank, coverage
    FROM k_all WHERE trank IS NOT NULL
)"""
)

_MEMORY_VECTOR_RANKS = """
q AS MATERIALIZED (SELECT CAST(:qvec AS vector) AS vec),
k_docs AS MATERIALIZED (
    SELECT k.id, coalesce(1 - (k.embedding <=> q.vec), -1) AS v,
           coalesce(coalesce(k.event_at, k.created_at) >= :w_start
                    AND coalesce(k.event_at, k.created_at) < :w_end, false) AS inw
    FROM memories AS k CROSS JOIN q
    WHERE k.user_id = :uid AND k.valid_until IS NULL AND k.status IN ('active', 'dying')
),
k_all AS MATERIALIZED (
    SELECT id, vrank, wrank FROM (
        SELECT d.id,
               CASE WHEN d.v >= CAST(:k_min_sim AS float8)
                    THEN row_number() OVER (ORDER BY d.v DESC, d.id DESC) END AS vrank,
               CASE WHEN d.inw
                    THEN row_number() OVER (ORDER BY d.inw DESC, d.v DESC, d.id DESC) END
                   AS wrank
        FROM k_docs AS d
    ) AS ranked
    WHERE vrank IS NOT NULL OR wrank IS NOT NULL
),
k_ranked AS (
    SELECT id, vrank, CAST(NULL AS bigint) AS trank, wrank, CAST(0 AS float8) AS coverage
    FROM k_all
)"""


@functools.cache
def _bind_names(sql: str) -> frozenset[str]:
    """The names of a statement's bound parameters (`:name`, not `::type`)."""
    return frozenset(re.findall(r"(?<![:\w]):(\w+)", sql))


Half = Literal["message words", "message vectors", "memory words", "memory vectors"]


@functools.cache
def _half_statement(half: Half, dim: int) -> Any:
    """One half of the first pass for messages or memories (see `first_pass`)."""
    if half == "message words":
        body = (
            "WITH " + _QUERY + "," + _messages_sql(vectors=False) + _MESSAGE_WORD_RANKS
            + _with_ranks(
                _SELECT_MESSAGES, r_1="array_agg(trank)", r_2="array_agg(srank)",
                r_3="array_agg(erank)", r_cov="array_agg(coverage)", source="m_all",
            )
        )  # fmt: skip
    elif half == "message vectors":
        body = (
            "WITH " + _MESSAGE_VECTOR_RANKS
            + _with_ranks(
                _SELECT_MESSAGES, r_1="array_agg(vrank)", r_2="array_agg(wrank)",
                r_3="array_agg(svrank)", source="m_all",
            )
        )  # fmt: skip
    elif half == "memory words":
        body = (
            "WITH " + _QUERY + "," + _MEMORY_WORD_RANKS
            + _with_ranks(
                _SELECT_MEMORIES, r_1="array_agg(trank)", r_cov="array_agg(coverage)",
                source="k_all",
            )
        )  # fmt: skip
    else:
        body = (
            "WITH " + _MEMORY_VECTOR_RANKS
            + _with_ranks(
                _SELECT_MEMORIES, r_1="array_agg(vrank)", r_2="array_agg(wrank)", source="k_all"
            )
        )  # fmt: skip
    binds = [
        bindparam("qvec", type_=BinaryVector(dim)),
        bindparam("w_start", type_=DateTime(timezone=True)),
        bindparam("w_end", type_=DateTime(timezone=True)),
    ]
    if half.endswith("words"):
        binds.append(bindparam("feedback", type_=ARRAY(BigInteger)))
    if half == "message words":
        binds.append(bindparam("also", type_=ARRAY(BigInteger)))
    statement = text(body).bindparams(*[b for b in binds if f":{b.key}" in body])
    return statement


_LIVE = "k.status IN ('active', 'dying')"
_WITH_FADED = "k.status IN ('active', 'dying', 'dead')"
"""Which memories are ranked: the live ones, or (`faded`, for the `search_memory` tool)
the retired ones too."""


@functools.cache
def _statement(
    *, messages: bool, memories: bool, dim: int, message_vectors: bool = True, faded: bool = False
) -> Any:
    ctes = [_QUERY]
    selects = []
    if messages:
        ctes.append(_messages_sql(vectors=message_vectors))
        selects.append(_SELECT_MESSAGES)
    if memories:
        ctes.append(_MEMORIES.replace("{k_statuses}", _WITH_FADED if faded else _LIVE))
        selects.append(_SELECT_MEMORIES)
    sql = "WITH " + ",".join(ctes) + "\n" + "\nUNION ALL".join(selects)
    binds = [
        bindparam("qvec", type_=BinaryVector(dim)),
        bindparam("feedback", type_=ARRAY(BigInteger)),
        bindparam("w_start", type_=DateTime(timezone=True)),
        bindparam("w_end", type_=DateTime(timezone=True)),
    ]
    if messages and not message_vectors:
        binds.append(bindparam("also", type_=ARRAY(BigInteger)))
    return text(sql).bindparams(*binds)


async def candidates(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    query: str,
    query_vector: Sequence[float],
    messages: bool = True,
    memories: bool = True,
    exclude_session_id: int | None = None,
    per_list: int = 50,
    tuning: Tuning = DEFAULT_TUNING,
    feedback_message_ids: Collection[int] = (),
    words_only_keeping: Collection[int] | None = None,
    window: Window | None = None,
    names: Sequence[str] = (),
    first_ranks: Mapping[int, Candidate] | None = None,
    faded: bool = False,
    unit_ranks: Mapping[int, int | None] | None = None,
) -> list[Candidate]:
    """The person's best `per_list` rows by vector and by text, with both ranks; one query.

    `feedback_message_ids` (the person's own messages; others' ids match nothing) lend
    their most distinctive terms to the query, per `tuning.feedback_terms`/`_weight`.
    With `words_only_keeping`, messages are ranked by words alone (no vector rank), and
    the messages it names are returned with their word ranks whatever those are.
    Rows from `window` (by message time, or a memory's event time) are ranked by cosine
    as a third list; the sessions by their summaries as a fourth; with `names`, the
    messages by the names they use as a fifth. With `first_ranks` (a first pass's
    messages by id), each row's vector and window ranks are those of the first pass;
    with `unit_ranks` (the first pass's summary-unit rank of every message it ranked),
    so are the unit ranks, and the summary sentences are not ranked again.
    """
    if not (messages or memories):
        return []
    if unit_ranks is not None:
        # The units rank by the query's vector alone: the first pass's ranks are these
        # ranks; the rows they keep are kept by id.
        top = tuning.unit_sessions if tuning.unit_weight > 0 else 0
        kept = [i for i, rank in unit_ranks.items() if rank is not None and rank <= top]
        words_only_keeping = [*(words_only_keeping or ()), *kept]
        tuning = replace(tuning, unit_weight=0.0)
    statement = _statement(
        messages=messages,
        memories=memories,
        dim=len(query_vector),
        message_vectors=words_only_keeping is None,
        faded=faded,
    )
    params = {
        "uid": user_id,
        "qvec": list(query_vector),
        "qtext": clean_query(query),
        "exclude_session": exclude_session_id,
        "n": per_list,
        "k1": tuning.bm25_k1,
        "min_sim": tuning.min_similarity,
        "k_min_sim": tuning.memory_min_similarity,
        "b": tuning.bm25_b,
        "n1": tuning.neighbour_1,
        "n2": tuning.neighbour_2,
        "feedback": sorted({int(i) for i in feedback_message_ids}),
        "fb_terms": max(0, tuning.feedback_terms),
        "fb_weight": tuning.feedback_weight,
        "entities": clean_query(" ".join(names)),
        "s_top": tuning.session_units if tuning.session_weight > 0 else 0,
        "unit_weight": tuning.unit_weight,
        "u_top": tuning.unit_sessions if tuning.unit_weight > 0 else 0,
        "unit_window": max(1, tuning.unit_window),
        "centre": 1.0 if tuning.centre_vectors else 0.0,
        "centre_prior": max(0.0, tuning.centre_prior),
        "centre_window": max(1, tuning.centre_window),
        "w_start": window.start if window else None,
        "w_end": window.end + SLACK if window else None,
    }
    if words_only_keeping is not None:
        params |= {"also": sorted({int(i) for i in words_only_keeping})}
    unused: tuple[str, ...] = () if memories else ("k_min_sim",)
    if not messages:
        unused = (
            "exclude_session",
            "n1",
            "n2",
            "centre",
            "centre_prior",
            "centre_window",
            "s_top",
            "unit_weight",
            "u_top",
            "unit_window",
        )
    elif words_only_keeping is not None:
        unused += ("centre", "centre_prior", "centre_window")
    params = {key: v for key, v in params.items() if key not in unused}
    async with sessions() as db:
        result = await db.execute(statement, params)
        keys = list(result.keys())
        rows = [dict(zip(keys, row, strict=True)) for row in result.all()]
    if first_ranks is not None:
        for values in rows:
            first = first_ranks.get(values["id"])
            values["vector_rank"] = first.vector_rank if first else None
            values["window_rank"] = first.window_rank if first else None
    if unit_ranks is not None:
        for values in rows:
            values["unit_rank"] = unit_ranks.get(values["id"])
    return [Candidate(**values) for values in rows]


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
    exclude_session_id: int | None = None,
    mode: Mode = "hybrid",
    tuning: Tuning = DEFAULT_TUNING,
    overlap: bool = True,
    faded: bool = False,
) -> list[Recalled]:
    """The `k` memories and past messages of this person most relevant to `query` (with
    `faded`, retired memories among them).

    With `overlap` (the default), the first pass ranks by words while the query is
    being embedded (`first_pass`); without, it embeds first and then runs one statement
    per kind, as before (the same candidates; kept for the latency bench's comparison).
    A `faded` search (the `search_memory` tool, off the reply's hot path) takes the latter.
    """
    cleaned = clean_query(query)
    if k <= 0 or not cleaned.strip() or not (include_messages or include_memories):
        return []
    window = time_window(cleaned, now) if tuning.window_weight > 0 else None
    without_vectors = False

    async def embedded() -> list[float]:
        nonlocal without_vectors
        try:
            return [float(x) for x in (await embedder.embed([cleaned]))[0]]
        except EmbeddingError as exc:
            # Without the query's vector, rank by words alone rather than fail the turn.
            log.warning("memory.recall_without_vectors", error=type(exc).__name__)
            without_vectors = True
            return [1.0] + [0.0] * (embedder.dim - 1)

    per_list = max(tuning.candidates, k)
    units: Mapping[int, int | None] | None = None  # known from the overlapping first pass
    if overlap and not faded:
        vector, found, units = await first_pass(
            sessions,
            embedded(),
            user_id=user_id,
            query=cleaned,
            messages=include_messages,
            memories=include_memories,
            dim=embedder.dim,
            exclude_session_id=exclude_session_id,
            per_list=per_list,
            tuning=tuning,
            window=window,
        )
    else:
        vector = await embedded()
        kinds = [(True, False)] * include_messages + [(False, True)] * include_memories
        parts = await asyncio.gather(
            *(
                candidates(
                    sessions,
                    user_id=user_id,
                    query=cleaned,
                    query_vector=vector,
                    messages=messages,
                    memories=memories,
                    exclude_session_id=exclude_session_id,
                    per_list=per_list,
                    tuning=tuning,
                    window=window,
                    faded=faded,
                )
                for messages, memories in kinds
            )
        )
        found = [c for part in parts for c in part]
    if without_vectors:
        mode = "text"

    width = max(k, tuning.feedback_docs)
    several = mode == "hybrid" and asks_for_several(cleaned)
    result = fuse(found, k=width, mode=mode, tuning=tuning, now=now)
    anchors = (
        window is None and mode == "hybrid" and min(tuning.window_weight, tuning.event_days) > 0
    )
    event = event_named(cleaned) if anchors else None
    anchored = False
    if event is not None:
        found, anchored = event_anchored(found, result, event, tuning=tuning, now=now)
    feedback = feedback_ids(found, result, mode=mode, tuning=tuning)
    if feedback:
        # The expanded query re-ranks messages by words; their vector ranks and the
        # memories' ranks are the first pass's.
        first = {c.id: c for c in found if c.kind == "message"}
        width = max(tuning.candidates, k)
        keep = [i for i, c in first.items() if min(_ranks(c)) <= width]
        again = await candidates(
            sessions,
            user_id=user_id,
            query=cleaned,
            query_vector=vector,
            messages=include_messages,
            memories=False,
            exclude_session_id=exclude_session_id,
            per_list=width,
            tuning=tuning,
            feedback_message_ids=feedback,
            words_only_keeping=keep,
            window=window,
            names=second_hop_names(result, cleaned, tuning, sessions_of(found)),
            first_ranks=first,
            unit_ranks=units if include_messages else None,
        )
        found = [c for c in found if c.kind == "memory"] + again
        result = fuse(found, k=k, mode=mode, tuning=tuning, now=now, several=several)
    elif several or anchored:
        result = fuse(found, k=k, mode=mode, tuning=tuning, now=now, several=several)
    log.debug(
        "memory.recalled",
        user_id=user_id,
        candidates=len(found),
        feedback=len(feedback),
        returned=min(k, len(result)),
    )
    return result[:k]


def second_hop_names(
    ranked: Sequence[Recalled],
    query: str,
    tuning: Tuning,
    session_of: Mapping[int, int | None] | None = None,
) -> list[str]:
    """Names in the best first-hop messages that the query does not use: with
    `session_of` (message id: session), from the best message of each session, so the
    hop is not led by one conversation's names alone."""
    if tuning.entity_docs <= 0 or tuning.entity_weight <= 0:
        return []
    messages = [r for r in ranked if r.kind == "message"]
    sessions = session_of or {}
    best = one_per_group(messages, lambda r: sessions.get(r.id), tuning.entity_docs)
    return linked_names([r.content for r in best], query, limit=tuning.entity_names)


def event_anchored(
    found: list[Candidate],
    ranked: Sequence[Recalled],
    event: tuple[str, tuple[str, ...]],
    *,
    tuning: Tuning,
    now: datetime,
) -> tuple[list[Candidate], bool]:
    """`found` with the time list of an event the question names ("after the move":
    `anchor.py`), anchored on the best first-pass message telling of it; and whether
    there was one."""
    relation, words = event
    at = event_time([(r.content, r.created_at) for r in ranked if r.kind == "message"], words)
    if at is None:
        return found, False
    ranks = window_ranks(
        found,
        event_window(relation, at, now, timedelta(days=tuning.event_days)),
        at=lambda c: c.created_at,
        score=lambda c: fused_score(c, mode="hybrid", tuning=tuning, now=now),
        eligible=lambda c: c.kind == "message" and c.window_rank is None,
    )
    if not ranks:
        return found, False
    return [
        replace(c, window_rank=ranks[i]) if i in ranks else c for i, c in enumerate(found)
    ], True


def sessions_of(found: Iterable[Candidate]) -> dict[int, int | None]:
    """The session of every message candidate, by id."""
    return {c.id: c.session_id for c in found if c.kind == "message"}


def _ranks(c: Candidate) -> tuple[int, ...]:
    """The vector and window ranks a row has (a large one when it has neither)."""
    return tuple(r for r in (c.vector_rank, c.window_rank) if r is not None) or (1 << 30,)


def _params(tuning: Tuning, **values: object) -> dict[str, object]:
    """The bound values of a recall statement, from the tuning and the call's own."""
    return {
        "k1": tuning.bm25_k1,
        "min_sim": tuning.min_similarity,
        "k_min_sim": tuning.memory_min_similarity,
        "b": tuning.bm25_b,
        "n1": tuning.neighbour_1,
        "n2": tuning.neighbour_2,
        "fb_terms": max(0, tuning.feedback_terms),
        "fb_weight": tuning.feedback_weight,
        "s_top": tuning.session_units if tuning.session_weight > 0 else 0,
        "unit_weight": tuning.unit_weight,
        "u_top": tuning.unit_sessions if tuning.unit_weight > 0 else 0,
        "unit_window": max(1, tuning.unit_window),
        "centre": 1.0 if tuning.centre_vectors else 0.0,
        "centre_prior": max(0.0, tuning.centre_prior),
        "centre_window": max(1, tuning.centre_window),
    } | values


@dataclass(frozen=True, slots=True)
class _Half:
    """What one half of the first pass returned: the rows it keeps, by id, and its ranks
    (and coverage) of every row it ranked."""

    kept: dict[int, dict[str, Any]]
    ranks: dict[str, dict[int, Any]]


_RANK_KEYS = ("r_ids", "r_1", "r_2", "r_3", "r_cov")


async def _half(
    sessions: async_sessionmaker[AsyncSession],
    half: Half,
    *,
    dim: int,
    params: dict[str, object],
) -> _Half:
    statement = _half_statement(half, dim)
    bound = {key: params[key] for key in _bind_names(statement.text)}
    async with sessions() as db:
        result = await db.execute(statement, bound)
        keys = list(result.keys())
        rows = result.all()
    ranked = len(keys) - len(_RANK_KEYS)
    fields, kind = keys[:ranked], keys.index("kind")
    kept: dict[int, dict[str, Any]] = {}
    ranks: dict[str, dict[int, Any]] = {}
    for row in rows:
        if row[kind] == "ranks":
            ids = row[ranked] or []
            ranks = {
                key: dict(zip(ids, values, strict=True))
                for key, values in zip(_RANK_KEYS[1:], row[ranked + 1 :], strict=True)
                if values is not None
            }
        else:
            values = dict(zip(fields, row, strict=False))
            kept[values["id"]] = values
    return _Half(kept, ranks)


def _joined(kind: Kind, words: _Half, vectors: _Half) -> list[Candidate]:
    """The rows either half keeps, each with its ranks in both halves' lists."""
    by_word, by_vector = words.ranks, vectors.ranks
    empty: dict[int, Any] = {}
    found = []
    for row_id, row in (vectors.kept | words.kept).items():
        values = row | {
            "vector_rank": by_vector.get("r_1", empty).get(row_id),
            "window_rank": by_vector.get("r_2", empty).get(row_id),
            "text_rank": by_word.get("r_1", empty).get(row_id),
            "coverage": float(by_word.get("r_cov", empty).get(row_id) or 0.0),
        }
        if kind == "message":
            values |= {
                "session_rank": by_word.get("r_2", empty).get(row_id),
                "unit_rank": by_vector.get("r_3", empty).get(row_id),
                "entity_rank": by_word.get("r_3", empty).get(row_id),
            }
        found.append(Candidate(**values))
    return found


def _settled(future: asyncio.Future[Any]) -> None:
    """Take a given-up future's outcome, so it is not reported as never retrieved."""
    if not future.cancelled():
        future.exception()


async def first_pass(
    sessions: async_sessionmaker[AsyncSession],
    query_vector: Awaitable[Sequence[float]],
    *,
    user_id: int,
    query: str,
    messages: bool,
    memories: bool,
    dim: int,
    exclude_session_id: int | None = None,
    per_list: int = 50,
    tuning: Tuning = DEFAULT_TUNING,
    window: Window | None = None,
) -> tuple[list[float], list[Candidate], dict[int, int | None]]:
    """`candidates` for the query alone (no feedback, no names), the query's vector and
    the database side by side: the word-ranked halves run while `query_vector` is being
    made, the vector-ranked halves once it is there, each kind on its own connection.
    Returns the vector, the candidates, and the summary-unit rank of every message the
    vector half ranked (by id; the feedback pass takes them instead of ranking the units
    again)."""
    params = _params(
        tuning,
        uid=user_id,
        qtext=clean_query(query),
        exclude_session=exclude_session_id,
        n=per_list,
        feedback=[],
        entities="",
        also=[],
        qvec=None,
        w_start=window.start if window else None,
        w_end=window.end + SLACK if window else None,
    )
    kinds: list[tuple[Kind, Half, Half]] = []
    if messages:
        kinds.append(("message", "message words", "message vectors"))
    if memories:
        kinds.append(("memory", "memory words", "memory vectors"))

    async def by_vector() -> tuple[list[float], list[_Half]]:
        vector = [float(x) for x in await query_vector]
        with_vector = params | {"qvec": vector}
        halves = await asyncio.gather(
            *(_half(sessions, half, dim=dim, params=with_vector) for _, _, half in kinds)
        )
        return vector, list(halves)

    # Summary sentences are ranked by vector: in the vector halves only.
    by_words = params | {"unit_weight": 0.0, "u_top": 0}
    words = asyncio.gather(
        *(_half(sessions, half, dim=dim, params=by_words) for _, half, _ in kinds)
    )
    try:
        vector, vector_halves = await by_vector()
    except BaseException:
        words.cancel()  # the turn is failing or being cancelled: no use waiting for words
        words.add_done_callback(_settled)
        raise
    word_halves = await words
    found = [
        c
        for (kind, _, _), words, vectors in zip(kinds, word_halves, vector_halves, strict=True)
        for c in _joined(kind, words, vectors)
    ]
    units = vector_halves[0].ranks.get("r_3", {}) if messages else {}
    return vector, found, units


def feedback_ids(
    found: Sequence[Candidate], ranked: Sequence[Recalled], *, mode: Mode, tuning: Tuning
) -> list[int]:
    """The best messages to expand the query from: none in vector mode or without a text hit."""
    if mode == "vector" or tuning.feedback_docs <= 0 or tuning.feedback_terms <= 0:
        return []
    if not any(c.text_rank is not None for c in found):
        return []
    messages = [r.id for r in ranked if r.kind == "message"]
    return messages[: tuning.feedback_docs]


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
            )
        )
    return int(getattr(result, "rowcount", 0))
