"""How long context assembly for one turn takes when the database holds many people's
memories and conversations: the query embedding, every query (standing memories, notes
to self, last summary, hybrid recall over memories and past messages) and the budgeting
— `memory.recall.within.assemble_within`, as a turn calls it (recall sized to the question,
threads brought along), on autocommit read sessions, with a deadline it never meets — and
`recall` alone.

Loads `--people` × `--memories` memories (default 1,000 × 1,000 = 1M rows) into an
embedded PostgreSQL with COPY: sentences from templates, real embeddings (MiniLM, the
default; `--embedder wordllama` for the previous one) of a few thousand distinct sentences
reused, each person's rows arriving in rounds (as
nightly extraction would write them) so they are spread over the table; ANALYZE, and
time both for random people and questions (the `context_*` figures; every turn is
also assembled the previous way, embedding before ranking, for the `*_previous_*`
ones). Then it adds
`--messages` past messages per person (default 1,000, in sessions of 20, months back),
which recall also ranks, and times both again (the `*_history_*` figures). Last, turns
whose recall times out: `memory.recall.within.assemble_within` with the default deadline
(300 ms) and a query embedder that never answers, as a turn calls it; the turn goes on
with the standing block (`degraded_turn_p95`: the deadline plus the standing reads).

Run: `python -m bench.retrieval_latency [--people 100] [--memories 1000] [--messages 1000]
[--turns 500] [--degraded-turns 100]`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector
from sqlalchemy import event

from bot.logs import configure_logging
from memory.recall.context import assemble_context
from memory.recall.embeddings import WordLlamaEmbedder
from memory.recall.minilm import MiniLMEmbedder
from memory.recall.retrieval import recall
from memory.recall.within import DEFAULT_DEADLINE, assemble_within
from memory.store.database import autocommit_session_factory, create_engine, migrate, start_embedded
from memory.store.ports import Embedder, Vector

ROUNDS = 20
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
SUBJECTS = (
    "Their sister Anna", "Their brother Tom", "Their dog Biscuit", "Their manager",
    "Their partner Sam", "Their mother", "Their best friend Leo", "Their daughter Mia",
    "Their cat Pepper", "Their neighbour", "Their grandfather", "Their flatmate Jo",
)  # fmt: skip
FACTS = (
    "loves hiking in the {place} every {day}",
    "is training for a marathon in {place}",
    "starts a new job as a {job} in {month}",
    "is allergic to {food} and avoids it at restaurants",
    "feels anxious about the {event} next {day}",
    "plays {sport} with friends on {day} evenings",
    "moved to {place} to work as a {job}",
    "has a {event} on {day} and wants to prepare",
    "cooks {food} whenever they feel homesick",
    "is learning {language} to travel to {place}",
    "gets stressed when work piles up before the {event}",
    "wants to adopt a {pet} from the shelter in {month}",
)
FILL = {
    "place": ("Alps", "Lisbon", "Lake District", "Kyoto", "Berlin", "Rockies", "Highlands"),
    "day": ("Saturday", "Sunday", "Monday", "Friday", "weekend"),
    "job": ("nurse", "data analyst", "teacher", "carpenter", "designer", "chef", "lawyer"),
    "month": ("January", "March", "June", "September", "December"),
    "food": ("peanuts", "shellfish", "ramen", "lentil soup", "dumplings", "gluten"),
    "event": ("job interview", "dentist appointment", "wedding", "exam", "presentation"),
    "sport": ("football", "tennis", "chess", "badminton", "basketball"),
    "language": ("Japanese", "Portuguese", "German", "Spanish"),
    "pet": ("puppy", "kitten", "rabbit", "parrot"),
}
QUESTIONS = (
    "How is my {event} going to go?",
    "Do you remember what I told you about {place}?",
    "what should I cook tonight, maybe {food}?",
    "I'm nervous about next {day}",
    "Any ideas for the {event}? I keep thinking about it",
    "my sister called about the {pet}",
    "remind me what my new job as a {job} involves",
    "Should I play {sport} this weekend or rest?",
)


def sentence(rng: random.Random, template: str) -> str:
    """Fill a template's slots at random."""
    return template.format(**{k: rng.choice(v) for k, v in FILL.items()})


def sentences(count: int, seed: int = 7) -> list[str]:
    """`count` distinct memory sentences."""
    rng = random.Random(seed)
    found: set[str] = set()
    while len(found) < count:
        found.add(f"{rng.choice(SUBJECTS)} {sentence(rng, rng.choice(FACTS))}.")
    return sorted(found)


def _status(rng: random.Random) -> tuple[str, datetime | None]:
    roll = rng.random()
    if roll < 0.05:
        return "forgotten", None
    if roll < 0.08:
        return "dead", None
    if roll < 0.13:
        return "active", NOW - timedelta(days=rng.randint(1, 100))  # superseded
    return "active", None


def _records(
    rng: random.Random, people: Sequence[int], round_no: int, per_round: int, pool: Any
) -> list[tuple[Any, ...]]:
    texts, vectors = pool
    rows = []
    for user_id in people:
        for i in range(per_round):
            pick = rng.randrange(len(texts))
            status, valid_until = _status(rng)
            created = NOW - timedelta(days=rng.uniform(0, 365))
            short_id = round_no * per_round + i + 1
            rows.append(
                (
                    user_id,
                    short_id,
                    rng.choice(("core", "active")),
                    rng.choice(("fact", "preference", "relationship", "event", "goal")),
                    texts[pick],
                    hashlib.sha256(f"{user_id}:{short_id}".encode()).hexdigest(),
                    float(rng.randint(1, 10)),
                    rng.uniform(0.5, 1.0),
                    "extracted",
                    created,
                    valid_until,
                    status,
                    vectors[pick],
                    created,
                )
            )
    return rows


COLUMNS = (
    "user_id", "short_id", "tier", "category", "content", "content_hash", "importance",
    "confidence", "source", "valid_from", "valid_until", "status", "embedding", "created_at",
)  # fmt: skip


async def load(url: str, people: int, memories: int, pool: Any) -> float:
    """Bulk-load the people and their memories with COPY; returns seconds taken."""
    started = time.perf_counter()
    conn = await asyncpg.connect(url)
    try:
        await register_vector(conn)
        await conn.execute("DROP INDEX IF EXISTS ix_memories_tsv")
        ids = [
            r["id"]
            for r in await conn.fetch(
                "INSERT INTO users (display_name) SELECT 'person ' || g "
                "FROM generate_series(1, $1) AS g RETURNING id",
                people,
            )
        ]
        rng = random.Random(11)
        per_round = max(1, memories // ROUNDS)
        for round_no in range(ROUNDS):
            records = _records(rng, ids, round_no, per_round, pool)
            await conn.copy_records_to_table("memories", records=records, columns=COLUMNS)
            if (round_no + 1) % 5 == 0:
                print(f"  round {round_no + 1}/{ROUNDS}: {len(records) * (round_no + 1):,} rows")
        await conn.execute("CREATE INDEX ix_memories_tsv ON memories USING gin (tsv)")
        await conn.execute("VACUUM ANALYZE memories")
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    return time.perf_counter() - started


SAYINGS = (
    "I'm a bit nervous about the {event} next {day}",
    "we went to {place} and it was lovely",
    "thinking of cooking {food} tonight",
    "my new job as a {job} starts in {month}",
    "played {sport} with friends, so tired now",
    "still practising my {language} every morning",
    "we might get a {pet} in {month}",
    "That sounds hard. How are you feeling about the {event}?",
    "Good luck with the {event}! You've prepared well.",
    "{place} sounds wonderful — what was the best part?",
)
PER_SESSION = 20
MESSAGE_COLUMNS = (
    "user_id", "session_id", "role", "content", "platform", "chat_id", "status",
    "created_at", "embedding",
)  # fmt: skip


def said(count: int, seed: int = 13) -> list[str]:
    """`count` distinct lines of conversation, each one or two sayings long."""
    rng = random.Random(seed)
    found: set[str] = set()
    while len(found) < count:
        first = sentence(rng, rng.choice(SAYINGS))
        second = sentence(rng, rng.choice(SAYINGS)) if rng.random() < 0.7 else ""
        stop = "" if first[-1] in ".!?" else "."
        found.add(f"{first}{stop} {second}".strip())
    return sorted(found)


def summary_of(lines: Sequence[str]) -> str:
    """A session summary as the model would write one: what the person talked about."""
    return "They talked about this: " + " ".join(lines)


async def load_messages(url: str, people: int, messages: int, pool: Any) -> None:
    """Everyone's past conversations: sessions of `PER_SESSION` messages, alternating
    person and companion, one session a day going back in time, each with a summary (the
    session units recall ranks), loaded round by round."""
    texts, vectors = pool
    conn = await asyncpg.connect(url)
    try:
        await register_vector(conn)
        await conn.execute("DROP INDEX IF EXISTS ix_messages_tsv")
        ids = [r["id"] for r in await conn.fetch("SELECT id FROM users ORDER BY id")]
        rng = random.Random(17)
        sessions = max(1, messages // PER_SESSION)
        for day in range(sessions):
            started = NOW - timedelta(days=sessions - day)
            picks = [[rng.randrange(len(texts)) for _ in range(PER_SESSION)] for _ in ids]
            summaries = [summary_of([texts[p] for p in chosen[:6:2]]) for chosen in picks]
            session_ids = [
                r["id"]
                for r in await conn.fetch(
                    "INSERT INTO sessions (user_id, started_at, last_message_at, closed_at, "
                    "summary) SELECT u, $2, $2, $2, s "
                    "FROM unnest($1::bigint[], $3::text[]) AS x(u, s) RETURNING id",
                    ids,
                    started,
                    summaries,
                )
            ]
            records = []
            for user_id, session_id, chosen in zip(ids, session_ids, picks, strict=True):
                for i, pick in enumerate(chosen):
                    role = "user" if i % 2 == 0 else "assistant"
                    at = started + timedelta(minutes=i)
                    records.append(
                        (user_id, session_id, role, texts[pick], "bench", f"c{user_id}",
                         "answered" if role == "user" else "stored", at, vectors[pick])
                    )  # fmt: skip
            await conn.copy_records_to_table("messages", records=records, columns=MESSAGE_COLUMNS)
            if (day + 1) % 10 == 0:
                print(f"  sessions {day + 1}/{sessions}: {len(records) * (day + 1):,} messages")
        await conn.execute("CREATE INDEX ix_messages_tsv ON messages USING gin (tsv)")
        await conn.execute("VACUUM ANALYZE messages")
        await conn.execute("VACUUM ANALYZE sessions")
    finally:
        await conn.close()


def percentile(values: Sequence[float], fraction: float) -> float:
    """The value below which `fraction` of `values` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


Timings = dict[str, list[float]]


async def measure(url: str, people: int, turns: int, embedder: Embedder) -> Timings:
    """Milliseconds per context assembly (`context`: recall ranking by words while the
    query is embedded; `previous`: embedding first, then one statement per kind, as
    before — both every turn, in alternating order, so they share the machine's
    conditions), per `recall` alone and per query embedding alone, after a warm-up; and
    the SQL statements each way ran per turn."""
    engine = create_engine(url, pool_size=8)  # a turn holds up to five at once
    sessions = autocommit_session_factory(engine)
    ran = [0]

    def count(*_: object) -> None:
        ran[0] += 1

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    rng = random.Random(5)
    async with engine.connect() as conn:
        first = int((await conn.exec_driver_sql("SELECT min(id) FROM users")).scalar_one())
    timings: Timings = {
        "context": [],
        "previous": [],
        "recall": [],
        "embed": [],
        "statements_context": [],
        "statements_previous": [],
    }
    try:
        for turn in range(turns + 20):
            user_id = first + rng.randrange(people)
            query = sentence(rng, rng.choice(QUESTIONS))
            for overlap in (True, False) if turn % 2 else (False, True):
                ran[0] = 0
                started = time.perf_counter()
                if overlap:  # what a turn calls now
                    done = await assemble_within(
                        sessions,
                        embedder,
                        user_id=user_id,
                        query=query,
                        now=NOW,
                        timezone="Europe/Copenhagen",
                        budget_tokens=1500,
                        deadline=60.0,  # measured whole, never cut short
                    )
                    if done.degraded is not None:
                        raise AssertionError(f"context assembly degraded: {done.degraded}")
                else:
                    await assemble_context(
                        sessions,
                        embedder,
                        user_id=user_id,
                        query=query,
                        now=NOW,
                        timezone="Europe/Copenhagen",
                        budget_tokens=1500,
                        overlap=False,
                    )
                if turn >= 20:
                    taken = (time.perf_counter() - started) * 1000
                    timings["context" if overlap else "previous"].append(taken)
                    way = "context" if overlap else "previous"
                    timings[f"statements_{way}"].append(float(ran[0]))
            started = time.perf_counter()
            await recall(sessions, embedder, user_id=user_id, query=query, k=8, now=NOW)
            middle = time.perf_counter()
            await embedder.embed([query])
            if turn >= 20:
                timings["recall"].append((middle - started) * 1000)
                timings["embed"].append((time.perf_counter() - middle) * 1000)
    finally:
        await engine.dispose()
    return timings


class NeverAnswers:
    """A query embedder that never answers (a provider hanging): recall cannot finish."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.name = "never-answers"

    async def embed(self, texts: list[str]) -> Vector:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def measure_degraded(
    url: str, people: int, turns: int, dim: int
) -> tuple[list[float], Counter[str]]:
    """Milliseconds per turn memory block whose recall times out (the default deadline),
    after a warm-up, and how each degraded: to the standing block ('recall_timeout'), or
    on a machine too loaded to read even that in time, to the turns alone
    ('context_timeout')."""
    engine = create_engine(url, pool_size=4)
    sessions = autocommit_session_factory(engine)
    rng = random.Random(11)
    hanging = NeverAnswers(dim)
    async with engine.connect() as conn:
        first = int((await conn.exec_driver_sql("SELECT min(id) FROM users")).scalar_one())
    times: list[float] = []
    reasons: Counter[str] = Counter()
    try:
        for turn in range(turns + 5):
            started = time.perf_counter()
            done = await assemble_within(
                sessions,
                hanging,
                user_id=first + rng.randrange(people),
                query=sentence(rng, rng.choice(QUESTIONS)),
                now=NOW,
                timezone="Europe/Copenhagen",
                budget_tokens=1500,
                deadline=DEFAULT_DEADLINE,
            )
            elapsed = (time.perf_counter() - started) * 1000
            if done.degraded is None:
                raise AssertionError("a recall that never answers did not time out")
            if turn >= 5:
                times.append(elapsed)
                reasons[done.degraded] += 1
    finally:
        await engine.dispose()
    return times, reasons


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "minilm": MiniLMEmbedder,  # the default
    "wordllama": WordLlamaEmbedder,  # the previous default
}


async def run(
    people: int,
    memories: int,
    messages: int,
    turns: int,
    embedder_name: str,
    degraded_turns: int = 100,
) -> None:
    """Load, measure and print the report."""
    embedder = EMBEDDERS[embedder_name]()
    texts = sentences(3000)
    pool = (texts, list(await embedder.embed(texts)))
    lines = said(3000)
    line_pool = (lines, list(await embedder.embed(lines)))
    with tempfile.TemporaryDirectory(prefix="latency-") as data_dir:
        server = start_embedded(Path(data_dir))
        try:
            engine = create_engine(server.url, pool_size=1)
            await migrate(engine, embedding_dim=embedder.dim)
            await engine.dispose()
            print(f"loading {people:,} people × {memories:,} memories", flush=True)
            seconds = await load(server.url, people, memories, pool)
            print(f"  loaded in {seconds:.0f} s", flush=True)
            phases = {"memories": await measure(server.url, people, turns, embedder)}
            degraded, reasons = await measure_degraded(
                server.url, people, degraded_turns, embedder.dim
            )
            if messages:
                print(f"loading {people:,} people × {messages:,} past messages", flush=True)
                started = time.perf_counter()
                await load_messages(server.url, people, messages, line_pool)
                print(f"  loaded in {time.perf_counter() - started:.0f} s", flush=True)
                phases["history"] = await measure(server.url, people, turns, embedder)
        finally:
            server.stop()
    report(people, memories, messages, phases, embedder.name, degraded, reasons)


def report(
    people: int,
    memories: int,
    messages: int,
    phases: dict[str, Timings],
    embedder: str,
    degraded: Sequence[float] = (),
    reasons: Counter[str] | None = None,
) -> None:
    """Print both measurements, then the figures: the issue's configuration (memories
    only) as `context_*`, and with every person's conversation history as `*_history_*`;
    the previous way of recall beside each as `*_previous_*`."""
    labels = {
        "memories": f"{people:,} people × {memories:,} memories",
        "history": f"the same, and {messages:,} past messages each (recall reads them too)",
    }
    figures = []
    print(f"\nembedder: {embedder}")
    for phase, timings in phases.items():
        contexts, previous, recalls = timings["context"], timings["previous"], timings["recall"]
        c50, c95, c99 = (percentile(contexts, f) for f in (0.50, 0.95, 0.99))
        p50, p95 = (percentile(previous, f) for f in (0.50, 0.95))
        r95 = percentile(recalls, 0.95)
        print(f"\n{labels[phase]}: {len(contexts)} turns")
        print(
            f"  context assembly (embedding + all queries + budgeting): mean "
            f"{statistics.fmean(contexts):.1f} ms, p50 {c50:.1f}, p95 {c95:.1f}, "
            f"p99 {c99:.1f}, max {max(contexts):.1f} (target p95 <= 20 ms)"
        )
        print(
            f"  the same, the previous way (embed, then rank): mean "
            f"{statistics.fmean(previous):.1f} ms, p50 {p50:.1f}, p95 {p95:.1f}"
        )
        print(
            f"  recall alone (k=8): mean {statistics.fmean(recalls):.1f} ms, "
            f"p50 {percentile(recalls, 0.5):.1f}, p95 {r95:.1f}"
        )
        ways = timings["statements_context"], timings["statements_previous"]
        print(
            "  SQL statements per turn (each embeds the query once): "
            + ", the previous way ".join(
                f"mean {statistics.fmean(n):.2f} ({min(n):.0f}-{max(n):.0f})" for n in ways
            )
        )
        embeds = timings["embed"]
        print(
            f"  the query's embedding alone: p50 {percentile(embeds, 0.5):.1f} ms, "
            f"p95 {percentile(embeds, 0.95):.1f}"
        )
        suffix = "" if phase == "memories" else "_history"
        figures += [
            f"figure context{suffix}_p50 {c50:.1f} ms",
            f"figure context{suffix}_p95 {c95:.1f} ms",
            f"figure context{suffix}_p99 {c99:.1f} ms",
            f"figure recall{suffix}_p95 {r95:.1f} ms",
            f"figure context{suffix}_previous_p50 {p50:.1f} ms",
            f"figure context{suffix}_previous_p95 {p95:.1f} ms",
        ]
    if degraded:
        d50, d95 = percentile(degraded, 0.5), percentile(degraded, 0.95)
        deadline = DEFAULT_DEADLINE * 1000
        print(
            f"\nturns whose recall times out ({len(degraded)}; deadline {deadline:.0f} ms, "
            f"memories only): p50 {d50:.1f} ms, p95 {d95:.1f}, max {max(degraded):.1f} "
            f"(target: the deadline plus the standing reads, about {deadline:.0f} + "
            f"{percentile(phases['memories']['context'], 0.5):.1f} ms); degraded to: "
            + ", ".join(f"{reason} {count}" for reason, count in sorted((reasons or {}).items()))
        )
        figures.append(f"figure degraded_turn_p95 {d95:.1f} ms")
    out = os.environ.get("COMPANION_BENCH_OUT")
    if out:
        data = {
            "latencies_ms": {
                f"context_{phase}": timings["context"] for phase, timings in phases.items()
            }
        }
        (Path(out) / "retrieval_latency.json").write_text(json.dumps(data))
    print()
    print("\n".join(figures))


def main() -> None:
    """Parse the sizes and run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default="minilm")
    parser.add_argument("--degraded-turns", type=int, default=100)
    args = parser.parse_args()
    configure_logging("WARNING")
    asyncio.run(
        run(
            args.people,
            args.memories,
            args.messages,
            args.turns,
            args.embedder,
            args.degraded_turns,
        )
    )


if __name__ == "__main__":
    main()
