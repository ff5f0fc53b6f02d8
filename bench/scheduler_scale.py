"""The scheduler at scale: claiming and dispatching one minute's due check-ins, and the
nightly patrol, over many people (fake delivery, fake language model, fake embedder).

An embedded PostgreSQL in a temporary directory is loaded server-side (INSERT … SELECT
from generate_series): people across ten timezones with realistic check-in times, each
with `--memories` memories (256-d vectors from a pool of random unit vectors; some
expiring, dying, forgotten, pinned, explicit; a tenth of the people talked yesterday and
have a few new memories, one of them a near-duplicate), their `create` events, past
conversations, and a few recurring threads with their thread and goal memories.

Each measurement runs in a fresh child process (`--phase`), so its peak RSS is the
scheduler's own: the check-in dispatch at `--small` people and at `--people` people
(for "memory independent of the number of people"), then the patrol over everyone
(everyone due at once: the worst case).

Run: `python -m bench.scheduler_scale [--people 100000] [--small 10000] [--memories 200]`;
quick: `--people 2000 --small 500 --memories 40`.

`--cohort N` measures instead a whole 09:00 cohort with a model that takes 3 s a call:
N people (one timezone, all at 09:00, no memories) spread over the 20-minute window,
claimed and sent by `--workers` processes (default 4) running the real scheduler code
(`run_checkins`: SKIP LOCKED claims sized by free slots, compose, the outbox steps,
delivery to a counting port) against one real PostgreSQL. Simulated: the model (a sleep)
and time: every process reads one shared clock running `--scale` times faster than the
wall clock, so a 3 s call sleeps 3/scale s and the database's own work also counts
`--scale` times over (pessimistic). Figures: `checkin_cohort_p100_minutes` (from 09:00
until the last one is sent), `checkin_missed`, `checkin_duplicates`.
`python -m bench.scheduler_scale --cohort 100000 --concurrency 64 --scale 2` (the
database work must keep up with `--scale` times the cohort's rate: at x2 about 170
check-ins a second of real work).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as clock_time
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bot.domain import Recipient, Reply
from bot.llm import Completion, LLMRequest, ToolCall
from bot.logs import configure_logging
from bot.timing import next_checkin
from memory.store.database import create_engine, migrate, start_embedded
from memory.store.ports import Vector

DIM = 384  # the default embedder's width (Settings.embedding_dim)
POOL = 4096
PATROL_AT = datetime(2026, 11, 4, 2, 30, tzinfo=UTC)  # 03:30 in Copenhagen
DISPATCH_AT = datetime(2026, 11, 4, 8, 0, 30, tzinfo=UTC)  # 09:00:30 in Copenhagen (CET)
ZONES = (
    ("Europe/Copenhagen", 15), ("Europe/Berlin", 15), ("Europe/Paris", 10),
    ("Europe/London", 10), ("America/New_York", 15), ("America/Los_Angeles", 10),
    ("Asia/Tokyo", 8), ("Asia/Kolkata", 7), ("Australia/Sydney", 5), ("America/Sao_Paulo", 5),
)  # fmt: skip
CHECKINS = ((clock_time(9), 60), (clock_time(8), 15), (clock_time(12), 10),
            (clock_time(18), 10), (clock_time(20), 5))  # fmt: skip
CHUNK = 5000  # people per loading statement


def _spread(weighted: tuple[tuple[Any, int], ...]) -> list[Any]:
    return [value for value, weight in weighted for _ in range(weight)]


ZONE_OF = _spread(ZONES)
CHECKIN_OF = _spread(CHECKINS)


def person_schedule(index: int) -> tuple[str, clock_time]:
    """The person's timezone and check-in time (deterministic, weighted)."""
    return ZONE_OF[index % 100], CHECKIN_OF[(index * 37) % 100]


# ---------------------------------------------------------------- loading (parent)

_MEMORIES = """
WITH g AS (
    SELECT u, k, random() AS r1, random() AS r2, random() AS r3,
           1 + floor(random() * 10)::int AS importance, floor(random() * 40)::int AS sessions,
           (u % 10 = 0 AND k > $3::int - 3) AS fresh
    FROM generate_series($1::bigint, $2::bigint) AS u, generate_series(1, $3::int) AS k
), c AS (
    SELECT g.*,
           CASE WHEN k % 20 = 0 THEN 'thread' WHEN k % 20 = 10 THEN 'goal'
                WHEN k % 40 = 5 THEN 'event'
                ELSE (ARRAY['identity', 'fact', 'relationship', 'preference'])[1 + k % 4]
           END AS category,
           format('%s %s (#%s)',
                  (ARRAY['Their sister Anna', 'Their brother Tom', 'Their dog Biscuit',
                         'Their manager', 'Their partner Sam', 'Their mother',
                         'Their best friend Leo', 'Their daughter Mia', 'Their cat Pepper',
                         'Their neighbour', 'Their grandfather', 'Their flatmate Jo'])
                      [1 + (u * 7 + k) % 12],
                  (ARRAY['loves hiking in the Alps', 'is training for a marathon',
                         'starts a new job in March', 'is allergic to peanuts',
                         'feels anxious about the exam', 'plays chess on Sundays',
                         'moved to Lisbon last year', 'has a wedding in June',
                         'cooks ramen when homesick', 'is learning Japanese',
                         'gets stressed before deadlines', 'wants to adopt a kitten'])
                      [1 + (u + k * 13) % 12],
                  k) AS content,
           CASE WHEN fresh THEN $4::timestamptz - interval '4 hours'
                ELSE $4::timestamptz - interval '30 days' - r1 * interval '300 days' END AS created
    FROM g
)
INSERT INTO memories (user_id, short_id, tier, category, content, content_hash, importance,
                      confidence, source, event_at, expires_at, valid_from, pinned, status,
                      forgotten_at, last_recalled_at, recall_seq, embedding,
                      created_at)
SELECT u, k,
       CASE WHEN category IN ('thread', 'goal', 'event') THEN 'active' ELSE 'core' END,
       category, content, md5(content), importance, 0.7 + r3 * 0.3,
       CASE WHEN k % 20 = 1 THEN 'user' ELSE 'extracted' END,
       CASE WHEN category = 'event' AND u % 100 = 1 THEN $4::timestamptz - interval '10 hours'
            WHEN category = 'event' THEN $4::timestamptz + (r2 * 10 + 0.5) * interval '1 day' END,
       CASE WHEN category = 'event' THEN $4::timestamptz + (r2 * 10 + 3) * interval '1 day'
            WHEN category IN ('thread', 'goal')
                THEN $4::timestamptz + (r2 * 60 - 1) * interval '1 day'
       END,
       created, k = 2,
       CASE WHEN k % 100 = 7 THEN 'forgotten' WHEN k % 100 = 13 THEN 'dying'
            WHEN k = 2 OR k % 20 = 1 THEN 'active'  -- pinned and explicit never decay
            WHEN category IN ('thread', 'goal', 'event')
                 AND importance * exp(-sessions / 30.0) < 1 THEN 'dead'
            WHEN importance * exp(-sessions / 30.0) < 2 THEN 'dying'
            ELSE 'active' END,
       CASE WHEN k % 100 = 7 THEN $4::timestamptz - r3 * interval '30.5 days' END,
       CASE WHEN k % 100 = 13 THEN $4::timestamptz - interval '2 hours'
            ELSE $4::timestamptz - interval '5 days' - r3 * interval '60 days' END,
       -sessions,  -- the person's session count starts at 0: this many sessions ago
       v.embedding, created
FROM c JOIN bench_vectors AS v  -- the newest memory of a talker repeats an older one
  ON v.id = (u * 31 + CASE WHEN fresh AND k = $3::int AND $3::int > 40 THEN k - 20 ELSE k END)
            % 4096
"""

_EVENTS = """
INSERT INTO memory_events (user_id, memory_id, action, actor, details, created_at)
SELECT user_id, id, 'create', 'extraction', jsonb_build_object('short_id', short_id), created_at
FROM memories WHERE user_id BETWEEN $1 AND $2
"""

_SESSIONS = """
INSERT INTO sessions (user_id, started_at, last_message_at, closed_at, extraction_due)
SELECT u, $3::timestamptz - h * interval '1 hour',
       $3::timestamptz - h * interval '1 hour' + interval '3 minutes',
       $3::timestamptz - h * interval '1 hour' + interval '3 minutes', false
FROM generate_series($1::bigint, $2::bigint) AS u, unnest(ARRAY[240, 20, 5]) AS h
WHERE h = 240 OR u % 10 = 0
"""

_MESSAGES = """
INSERT INTO messages (user_id, session_id, role, content, platform, chat_id, status, created_at)
SELECT s.user_id, s.id, CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
       CASE WHEN i % 2 = 1 THEN 'Today I went climbing with Anna and it was great'
            ELSE 'That sounds lovely — how are your arms holding up?' END,
       'bench', 'c' || s.user_id, 'answered', s.started_at + i * interval '45 seconds'
FROM sessions AS s, generate_series(1, 4) AS i
WHERE s.user_id BETWEEN $1 AND $2
"""

_WATERMARKS = """
UPDATE sessions AS s SET extracted_through = m.last
FROM (SELECT session_id, max(id) AS last FROM messages
      WHERE user_id BETWEEN $1 AND $2 GROUP BY session_id) AS m
WHERE s.id = m.session_id
"""

_THREADS = """
INSERT INTO threads (user_id, title, session_ids)
SELECT u, 'Planning the move to Aarhus (' || u || ')', ARRAY[1, 2, 3]::bigint[]
FROM generate_series($1::bigint, $2::bigint) AS u WHERE u % 100 = 0
"""

_THREAD_MEMORIES = """
UPDATE memories AS m SET thread_id = t.id
FROM threads AS t
WHERE t.user_id BETWEEN $1 AND $2 AND m.user_id = t.user_id
  AND m.category IN ('thread', 'goal')
"""


async def _load_people(conn: asyncpg.Connection, first: int, last: int, memories: int) -> None:
    """Users, identities and everything of theirs for ids first..last (one chunk)."""
    users = []
    for index in range(first, last + 1):
        tz, at = person_schedule(index)
        due = next_checkin(DISPATCH_AT - timedelta(minutes=1), tz, at)  # only that minute
        users.append((index, f"person {index}", tz, at, due,
                      PATROL_AT - timedelta(minutes=1), PATROL_AT - timedelta(days=1),
                      memories))  # fmt: skip
    await conn.copy_records_to_table(
        "users",
        records=users,
        columns=["id", "display_name", "timezone", "checkin_time", "next_checkin_at",
                 "next_patrol_at", "last_patrol_at", "memory_seq"],
    )  # fmt: skip
    await conn.copy_records_to_table(
        "identities",
        records=[(i, "bench", f"u{i}", f"c{i}") for i in range(first, last + 1)],
        columns=["user_id", "platform", "platform_user_id", "chat_id"],
    )
    await conn.execute(_MEMORIES, first, last, memories, PATROL_AT)
    await conn.execute(_EVENTS, first, last)
    await conn.execute(_SESSIONS, first, last, PATROL_AT)
    await conn.execute(_MESSAGES, first, last)
    await conn.execute(_WATERMARKS, first, last)
    await conn.execute(_THREADS, first, last)
    await conn.execute(_THREAD_MEMORIES, first, last)


async def _loader(url: str) -> asyncpg.Connection:
    conn = await asyncpg.connect(url)
    await register_vector(conn)
    await conn.execute("SET session_replication_role = replica")  # no FK triggers while loading
    await conn.execute("SET synchronous_commit = off")
    await conn.execute("SET maintenance_work_mem = '1GB'")
    return conn


async def _vector_pool(url: str) -> None:
    conn = await _loader(url)
    try:
        rng = np.random.default_rng(42)
        pool = rng.normal(size=(POOL, DIM)).astype(np.float32)
        pool /= np.linalg.norm(pool, axis=1, keepdims=True)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_vectors "
            f"(id int PRIMARY KEY, embedding vector({DIM}))"
        )
        await conn.copy_records_to_table(
            "bench_vectors", records=[(i, pool[i]) for i in range(POOL)]
        )
    finally:
        await conn.close()


async def _secondary_indexes(conn: asyncpg.Connection) -> list[tuple[str, str]]:
    """Indexes that can be dropped and rebuilt (not primary keys or constraints)."""
    rows = await conn.fetch("""
        SELECT i.indexname, i.indexdef FROM pg_indexes AS i
        WHERE i.tablename IN ('memories', 'memory_events', 'messages')
          AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c WHERE c.conname = i.indexname)
    """)
    return [(r["indexname"], r["indexdef"]) for r in rows]


async def load(url: str, first: int, last: int, memories: int, *, rebuild: bool) -> float:
    """Load people first..last, two loaders at once; with `rebuild`, drop the secondary
    indexes first and build them after (a bulk load). Returns seconds."""
    started = time.perf_counter()
    admin = await _loader(url)
    try:
        await admin.execute("ALTER SYSTEM SET max_wal_size = '8GB'")
        await admin.execute("SELECT pg_reload_conf()")
        indexes = await _secondary_indexes(admin) if rebuild else []
        for name, _definition in indexes:
            await admin.execute(f"DROP INDEX {name}")
        chunks = [(a, min(a + CHUNK - 1, last)) for a in range(first, last + 1, CHUNK)]
        done = 0

        async def worker(queue: list[tuple[int, int]]) -> None:
            nonlocal done
            conn = await _loader(url)
            try:
                while queue:
                    a, b = queue.pop(0)
                    await _load_people(conn, a, b, memories)
                    done += b - a + 1
                    print(f"  {done:,}/{last - first + 1:,} people "
                          f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
            finally:
                await conn.close()

        await asyncio.gather(worker(chunks), worker(chunks))
        for name, definition in indexes:
            print(f"  index {name}", flush=True)
            await admin.execute(definition)
        print("  vacuum analyze", flush=True)
        await admin.execute("VACUUM ANALYZE")
        await admin.execute("ALTER SYSTEM RESET max_wal_size")
        await admin.execute("SELECT pg_reload_conf()")
    finally:
        await admin.close()
    return time.perf_counter() - started


async def reset_checkins(url: str) -> None:
    """Undo a dispatch run: the outbox, the conversations it started, the schedule."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("DELETE FROM outreach")
        await conn.execute("DELETE FROM sessions WHERE started_at >= $1", PATROL_AT)
        tomorrow = DISPATCH_AT - timedelta(seconds=30) + timedelta(days=1)
        await conn.execute(
            "UPDATE users SET next_checkin_at = next_checkin_at - interval '1 day' "
            "WHERE next_checkin_at = $1",
            tomorrow,
        )
        await conn.execute("VACUUM ANALYZE users")
        await conn.execute("VACUUM ANALYZE outreach")
    finally:
        await conn.close()


async def size_of(url: str) -> dict[str, Any]:
    """Rows and bytes of the big tables."""
    conn = await asyncpg.connect(url)
    try:
        return {
            "memories": await conn.fetchval("SELECT count(*) FROM memories"),
            "database_gb": round(
                await conn.fetchval("SELECT pg_database_size(current_database())") / 2**30, 1
            ),
        }
    finally:
        await conn.close()


# ---------------------------------------------------------------- measuring (child)


@dataclass
class FixedClock:
    """The bench's clock: a fixed instant."""

    at: datetime

    def now(self) -> datetime:
        """The instant."""
        return self.at


class HashEmbedder:
    """A deterministic stand-in for the embedder (no model weights to load)."""

    dim = DIM
    name = "hash"

    async def embed(self, texts: list[str]) -> Vector:
        """One unit vector per text, from its hash."""
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            row = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
            rows.append(row / np.linalg.norm(row))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM)


class FakeModel:
    """Answers every forced tool instantly: always something to say, diaries, merges."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    async def complete(self, request: LLMRequest) -> Completion:
        """A canned tool call for the tool the request forces."""
        name = request.force_tool or "text"
        self.calls[name] += 1
        answers: dict[str, dict[str, object]] = {
            "decide_checkin": {"send": True, "message": "Morning! How did the climbing go?"},
            "write_diary": {
                "lines": ["We talked about climbing.", "They sounded happy.", "A good day."],
                "notes_to_self": ["Ask about Anna.", "Ask about the arms.", "Keep it light."],
            },
            "merge_memories": {"content": request.turns[0].content[7:80].strip() + " (merged)"},
            "record_memories": {"memories": []},
        }
        if name not in answers:
            return Completion(text="Tell me more.", model="fake")
        return Completion(text="", model="fake", tool_calls=(ToolCall("t", name, answers[name]),))


@dataclass
class CountingDelivery:
    """A delivery port that only counts."""

    platform: str = "bench"
    sent: list[int] = field(default_factory=list)

    async def send(self, recipient: Recipient, reply: Reply) -> str:
        """Accept the message."""
        self.sent.append(recipient.user_id)
        return str(len(self.sent))


async def _core(url: str, at: datetime, data_dir: str) -> Any:
    from bot.bootstrap import build_core
    from bot.config import Settings

    settings = Settings(database_url=url, data_dir=Path(data_dir))
    return await build_core(
        settings, llm=FakeModel(), clock=FixedClock(at), embedder=HashEmbedder()
    )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure_dispatch(url: str, data_dir: str, concurrency: int = 8) -> dict[str, Any]:
    """Claim and dispatch the busy minute's check-ins, timing each claim transaction."""
    from scheduler.claims import claim_checkins, claim_followups, schedule_new
    from scheduler.deps import SchedulerConfig, deps_from
    from scheduler.dispatch import dispatch

    core = await _core(url, DISPATCH_AT, data_dir)
    delivery = CountingDelivery()
    core.outbound.register(delivery)
    deps = deps_from(core, SchedulerConfig(llm_steps=True, concurrency=concurrency))
    claims_ms: list[float] = []
    outcomes: Counter[str] = Counter()
    started = time.perf_counter()
    await schedule_new(deps.sessions, now=DISPATCH_AT)
    while True:
        t0 = time.perf_counter()
        claims, taken = await claim_checkins(deps.sessions, now=DISPATCH_AT, config=deps.config)
        claims_ms.append((time.perf_counter() - t0) * 1000)
        outcomes += await dispatch(deps, claims)
        if taken < deps.config.batch_size:
            break
    total = time.perf_counter() - started
    t0 = time.perf_counter()
    followups, _ = await claim_followups(deps.sessions, now=DISPATCH_AT, config=deps.config)
    followup_ms = (time.perf_counter() - t0) * 1000
    await core.aclose()
    batches = [ms for ms in claims_ms[:-1]] or claims_ms  # the last one finds the rest
    return {
        "due": sum(outcomes.values()),
        "outcomes": dict(outcomes),
        "delivered": len(delivery.sent),
        "distinct": len(set(delivery.sent)),
        "claim_ms": claims_ms,
        "claim_p50_ms": statistics.median(batches),
        "claim_p95_ms": percentile(batches, 0.95),
        "total_s": total,
        "followup_scan_ms": followup_ms,
        "followups": len(followups),
        "rss_mb": _peak_rss_mb(),
    }


async def measure_patrol(url: str, data_dir: str, concurrency: int = 8) -> dict[str, Any]:
    """The nightly patrol (and diary) over everyone, all due at once."""
    from scheduler.deps import SchedulerConfig, deps_from
    from scheduler.patrol import run_nightly

    core = await _core(url, PATROL_AT, data_dir)
    deps = deps_from(core, SchedulerConfig(llm_steps=True, concurrency=concurrency))
    started = time.perf_counter()
    report = await run_nightly(deps)
    total = time.perf_counter() - started
    calls = dict(core.llm.calls)
    await core.aclose()
    assert report is not None
    return {
        "people": report.people,
        "changes": dict(report.changes),
        "seconds": {k: round(v, 1) for k, v in report.seconds.items()},
        "total_s": total,
        "model_calls": calls,
        "rss_mb": _peak_rss_mb(),
    }


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def child(phase: str, url: str, concurrency: int) -> dict[str, Any]:
    """Run one measurement in a fresh process; its JSON result."""
    with tempfile.TemporaryDirectory(prefix="bench-child-") as data_dir:
        result = subprocess.run(
            [sys.executable, "-m", "bench.scheduler_scale", "--phase", phase, "--url", url,
             "--data-dir", data_dir, "--concurrency", str(concurrency)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------- the 09:00 cohort

NINE = datetime(2026, 11, 4, 8, 0, tzinfo=UTC)  # 09:00 in Copenhagen (CET)
COHORT_ZONE = "Europe/Copenhagen"
COHORT_LEAD = timedelta(minutes=1)  # the shared clock starts at 08:59
MODEL_SECONDS = 3.0
SPREAD = timedelta(minutes=20)


@dataclass
class ScaledClock:
    """One clock for every worker: `start` at wall time `wall0`, `scale` times faster."""

    start: datetime
    wall0: float
    scale: float

    def now(self) -> datetime:
        """The shared virtual instant."""
        return self.start + timedelta(seconds=(time.time() - self.wall0) * self.scale)


class ThreeSecondModel:
    """Drafts every check-in after 3 s of (scaled) time; counts the calls at once."""

    def __init__(self, scale: float) -> None:
        self.pause = MODEL_SECONDS / scale
        self.running = 0
        self.most = 0
        self.calls = 0

    async def complete(self, request: LLMRequest) -> Completion:
        """A `decide_checkin` call after the pause."""
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.pause)
        finally:
            self.running -= 1
        self.calls += 1
        draft = {"send": True, "message": "Morning! How did the climbing go?"}
        return Completion(text="", model="3s", tool_calls=(ToolCall("t", "decide_checkin", draft),))


@dataclass
class TimedDelivery:
    """A delivery port that records who got a message, and when (seconds after 09:00)."""

    clock: ScaledClock
    platform: str = "bench"
    sent: list[tuple[int, float]] = field(default_factory=list)

    async def send(self, recipient: Recipient, reply: Reply) -> str:
        """Accept the message."""
        self.sent.append((recipient.user_id, (self.clock.now() - NINE).total_seconds()))
        return str(len(self.sent))


async def load_cohort(url: str, people: int) -> None:
    """`people` at 09:00 in one zone, each already scheduled at their spread time."""
    from bot.timing import spread_checkin

    conn = await _loader(url)
    try:
        users = [
            (i, f"person {i}", COHORT_ZONE, clock_time(9), True,
             next_checkin(NINE - timedelta(hours=1), COHORT_ZONE,
                          spread_checkin(clock_time(9), i, SPREAD, None, None)))
            for i in range(1, people + 1)
        ]  # fmt: skip
        await conn.copy_records_to_table(
            "users",
            records=users,
            columns=["id", "display_name", "timezone", "checkin_time", "timezone_known",
                     "next_checkin_at"],
        )  # fmt: skip
        await conn.copy_records_to_table(
            "identities",
            records=[(i, "bench", f"u{i}", f"c{i}") for i in range(1, people + 1)],
            columns=["user_id", "platform", "platform_user_id", "chat_id"],
        )
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def cohort_worker(
    url: str, data_dir: str, concurrency: int, scale: float, wall0: float
) -> dict[str, Any]:
    """One process's share: the minute tick's check-ins until the cohort is through."""
    from bot.bootstrap import build_core
    from bot.config import Settings
    from scheduler.checkins import run_checkins
    from scheduler.deps import SchedulerConfig, deps_from

    clock = ScaledClock(NINE - COHORT_LEAD, wall0, scale)
    model = ThreeSecondModel(scale)
    settings = Settings(database_url=url, data_dir=Path(data_dir))
    core = await build_core(settings, llm=model, clock=clock, embedder=HashEmbedder())
    delivery = TimedDelivery(clock)
    core.outbound.register(delivery)
    config = SchedulerConfig(llm_steps=True, concurrency=concurrency, spread=SPREAD)
    deps = deps_from(core, config)
    outcomes: Counter[str] = Counter()
    await asyncio.sleep(max(0.0, wall0 - time.time()))
    while True:
        tick = time.time()
        found = await run_checkins(deps)
        outcomes += found
        if not found["claimed"] and clock.now() > NINE + SPREAD + timedelta(minutes=2):
            break
        await asyncio.sleep(max(0.0, config.tick_seconds / scale - (time.time() - tick)))
    await core.aclose()
    return {
        "sent": delivery.sent,
        "outcomes": dict(outcomes),
        "most_at_once": model.most,
        "model_calls": model.calls,
        "rss_mb": _peak_rss_mb(),
    }


async def cohort_rows(url: str) -> dict[str, int]:
    """Outreach rows by status:reason, and people with more than one row."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT status || coalesce(':' || reason, '') AS s, count(*) AS n "
            "FROM outreach GROUP BY 1"
        )
        twice = await conn.fetchval(
            "SELECT count(*) FROM (SELECT user_id FROM outreach GROUP BY user_id "
            "HAVING count(*) > 1) AS t"
        )
    finally:
        await conn.close()
    return {**{r["s"]: r["n"] for r in rows}, "people_with_two_rows": twice}


async def run_cohort(people: int, workers: int, concurrency: int, scale: float) -> None:
    """Load the cohort, run the workers as child processes, print the report."""
    with tempfile.TemporaryDirectory(prefix="checkin-cohort-") as data_dir:
        server = start_embedded(Path(data_dir))
        try:
            engine = create_engine(server.url, pool_size=1)
            await migrate(engine, embedding_dim=DIM)
            await engine.dispose()
            print(f"loading {people:,} people due at 09:00", flush=True)
            await load_cohort(server.url, people)
            wall0 = time.time() + 20  # every worker built and waiting by then
            started = time.perf_counter()
            children = [
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "bench.scheduler_scale",
                    "--phase",
                    "cohort",
                    "--url",
                    server.url,
                    "--data-dir",
                    data_dir,
                    "--concurrency",
                    str(concurrency),
                    "--scale",
                    str(scale),
                    "--wall0",
                    str(wall0),
                    stdout=asyncio.subprocess.PIPE,
                )
                for _ in range(workers)
            ]
            outputs = await asyncio.gather(*(child.communicate() for child in children))
            wall = time.perf_counter() - started
            rows = await cohort_rows(server.url)
        finally:
            server.stop()
    results = [json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outputs]
    report_cohort(people, workers, concurrency, scale, wall, results, rows)


def report_cohort(
    people: int,
    workers: int,
    concurrency: int,
    scale: float,
    wall: float,
    results: list[dict[str, Any]],
    rows: dict[str, int],
) -> None:
    """Print the cohort run, then its figures."""
    sends = Counter(user for r in results for user, _ in r["sent"])
    times = [at for r in results for _, at in r["sent"]]
    duplicates = sum(n - 1 for n in sends.values() if n > 1) + rows["people_with_two_rows"]
    missed = people - len(sends)
    last = max(times) / 60 if times else float("nan")
    rate = len(times) / max(max(times) - min(times), 1) if times else 0
    print()
    print(f"09:00 cohort: {people:,} people, {workers} worker processes x {concurrency} "
          f"at once, model {MODEL_SECONDS:.0f} s a call, clock x{scale:g} "
          f"({wall:.0f} s of wall time)")  # fmt: skip
    for n, r in enumerate(results):
        print(f"  worker {n}: sent {len(r['sent']):,}, most at once {r['most_at_once']}, "
              f"outcomes {r['outcomes']}, peak RSS {r['rss_mb']:.0f} MB")  # fmt: skip
    print(f"  outbox rows {rows}")
    print(f"  first sent {min(times) / 60:.1f} min after 09:00, last {last:.1f} min; "
          f"{rate:.1f} sent a second = {rate * 60:,.0f} model calls a minute")  # fmt: skip
    print()
    print(f"figure checkin_cohort_p100_minutes {last:.1f} min")
    print(f"figure checkin_missed {missed} people")
    print(f"figure checkin_duplicates {duplicates} messages")


# ---------------------------------------------------------------- report


async def run(people: int, small: int, memories: int, concurrency: int) -> None:
    """Load, measure in child processes, print the report."""
    with tempfile.TemporaryDirectory(prefix="scheduler-scale-") as data_dir:
        server = start_embedded(Path(data_dir))
        try:
            engine = create_engine(server.url, pool_size=1)
            await migrate(engine, embedding_dim=DIM)
            await engine.dispose()
            await _vector_pool(server.url)
            print(f"loading {small:,} people × {memories} memories", flush=True)
            first_load = await load(server.url, 1, small, memories, rebuild=False)
            at_small = child("dispatch", server.url, concurrency)
            await reset_checkins(server.url)
            print(f"loading {people - small:,} more people", flush=True)
            second_load = await load(server.url, small + 1, people, memories, rebuild=True)
            sizes = await size_of(server.url)
            at_full = child("dispatch", server.url, concurrency)
            await reset_checkins(server.url)
            patrol = child("patrol", server.url, concurrency)
        finally:
            server.stop()
    report(people, small, memories, (first_load, second_load), sizes, at_small, at_full, patrol)


def report(
    people: int,
    small: int,
    memories: int,
    loads: tuple[float, float],
    sizes: dict[str, Any],
    at_small: dict[str, Any],
    at_full: dict[str, Any],
    patrol: dict[str, Any],
) -> None:
    """Print what was measured, then the figures."""
    print()
    print(f"scheduler at scale: {people:,} people × {memories} memories "
          f"({sizes['memories']:,} rows, {sizes['database_gb']} GB), loaded in "
          f"{loads[0] + loads[1]:.0f} s")  # fmt: skip
    for label, run_ in ((f"{small:,}", at_small), (f"{people:,}", at_full)):
        print(f"\ncheck-ins at {label} people: {run_['due']:,} due in the busiest minute, "
              f"{len(run_['claim_ms'])} claim transactions of up to 500")  # fmt: skip
        print(f"  claim ms per batch: {', '.join(f'{ms:.0f}' for ms in run_['claim_ms'])}")
        print(f"  claim p50 {run_['claim_p50_ms']:.1f} ms, p95 {run_['claim_p95_ms']:.1f} ms; "
              f"claim + compose + deliver, all: {run_['total_s']:.1f} s "
              f"({1000 * run_['total_s'] / max(run_['due'], 1):.1f} ms per person, "
              f"8 at a time)")  # fmt: skip
        print(f"  outcomes {run_['outcomes']}, delivered {run_['delivered']:,} "
              f"to {run_['distinct']:,} people; follow-up scan {run_['followup_scan_ms']:.1f} ms; "
              f"peak RSS {run_['rss_mb']:.0f} MB")  # fmt: skip
    print(f"\npatrol: {patrol['people']:,} people in {patrol['total_s'] / 60:.1f} min; "
          f"peak RSS {patrol['rss_mb']:.0f} MB")  # fmt: skip
    print(f"  changes {patrol['changes']}")
    print(f"  seconds {patrol['seconds']}")
    print(f"  fake model calls {patrol['model_calls']}")
    print()
    print(f"figure due_claim_batch_p95 {at_full['claim_p95_ms']:.1f} ms")
    print(f"figure checkin_minute_dispatch {at_full['total_s']:.1f} s")
    print(f"figure patrol_100k_minutes {patrol['total_s'] / 60:.2f} min")
    print(f"figure scheduler_rss_mb_{_count(small)} {at_small['rss_mb']:.0f} MB")
    print(f"figure scheduler_rss_mb_{_count(people)} {at_full['rss_mb']:.0f} MB")
    print(f"figure patrol_rss_mb {patrol['rss_mb']:.0f} MB")


def _count(people: int) -> str:
    """10000 → '10k', 100000 → '100k', 2500 → '2500' (for figure names)."""
    return f"{people // 1000}k" if people % 1000 == 0 else str(people)


def main() -> None:
    """Parse the sizes and run (or run one measurement, as a child)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--people", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--phase", choices=("dispatch", "patrol", "cohort"))
    parser.add_argument("--cohort", type=int, help="measure one 09:00 cohort of N people")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--scale", type=float, default=2.0)
    parser.add_argument("--wall0", type=float)
    parser.add_argument("--url")
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    configure_logging("WARNING")
    if args.phase == "cohort":
        found = asyncio.run(
            cohort_worker(args.url, args.data_dir, args.concurrency, args.scale, args.wall0)
        )
        print(json.dumps(found))
        return
    if args.cohort:
        asyncio.run(run_cohort(args.cohort, args.workers, args.concurrency, args.scale))
        return
    if args.phase:
        measure = measure_dispatch if args.phase == "dispatch" else measure_patrol
        result = asyncio.run(measure(args.url, args.data_dir, args.concurrency))
        print(json.dumps(result, default=str))
        return
    if not 0 < args.small < args.people:
        parser.error("--small must be between 0 and --people")
    asyncio.run(run(args.people, args.small, args.memories, args.concurrency))


if __name__ == "__main__":
    main()
