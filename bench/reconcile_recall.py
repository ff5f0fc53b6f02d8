"""Correction recall: is the memory a correction replaces among what the fast model is shown?

Every case of the hand-written corpus (tests/data/corrections.json) becomes one person
with realistic memories (their own plus a shared background of important ones) who says
one thing; `extract_session` then runs for real (PostgreSQL, the default MiniLM
embedder, the real prompt and reconcile path) with a scripted fast model that answers
correctly from the labels shown to it. Measured per case: whether the memory it corrects
(or rewords, or must leave alone) was in the prompt's <remembered> block, and what the
store did. For comparison: the old selection (the 40 most important memories), a
selection on the candidate's own text (what a second, per-candidate call would see), and
how many updates the old similarity rule (cosine >= 0.92: a duplicate) would have dropped.

Run: `python -m bench.reconcile_recall`; ends with `figure reconcile_candidate_recall`.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.logs import configure_logging
from memory.care.repository import SqlMemoryRepository
from memory.learning.extraction import KNOWN_IN_PROMPT, extract_session
from memory.recall.embeddings import RecentEmbeddings
from memory.recall.minilm import MiniLMEmbedder
from memory.recall.relevant import relevant_memories
from memory.store.database import create_engine, migrate, session_factory, start_embedded
from memory.store.items import MemoryItem, content_hash
from memory.store.ports import Embedder
from memory.store.tables import Memory, Message, User
from memory.store.tables import Session as SessionRow

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "corrections.json"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
OLD_DUPLICATE = 0.92
CONCURRENT = 4  # cases at once (each is its own person)
_SHOWN = re.compile(r'<item label="(m\d+)">')
_SAID = re.compile(r'<message id="(\d+)" from="person"')


class _Clock:
    def now(self) -> datetime:
        return NOW


@dataclass
class _ScriptedModel:
    """Answers `record_memories` with the case's candidate and the right verdict, by the
    labels the prompt shows; remembers which labels those were."""

    candidate: dict[str, Any]
    verdict: tuple[str, str] | None  # ("supersedes" | "same_as", label)
    shown: set[str] = field(default_factory=set)
    judged: int = 0  # second calls (judge_memories), answered "new"

    async def call_tool(self, *, prompt: str, tool_name: str, **_: Any) -> dict[str, Any]:
        if tool_name == "judge_memories":
            self.judged += 1
            return {"verdicts": []}
        if tool_name != "record_memories":
            raise RuntimeError(f"unexpected tool {tool_name}")
        remembered = prompt.split("<remembered>", 1)[1].split("</remembered>", 1)[0]
        self.shown = set(_SHOWN.findall(remembered))
        said = int(_SAID.findall(prompt.split("<conversation>", 1)[1])[0])
        item = {
            "content": self.candidate["content"],
            "category": self.candidate["category"],
            "tier": "active" if self.candidate["category"] in _ACTIVE else "core",
            "importance": 6,
            "confidence": 0.9,
            "evidence_message_ids": [said],
        }
        if self.verdict is not None and self.verdict[1] in self.shown:
            item[self.verdict[0]] = self.verdict[1]
        return {"memories": [item]}


_ACTIVE = frozenset({"thread", "goal", "emotion", "event"})


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case: the target shown or not (None: no target), and what happened."""

    id: str
    label: str
    shown: bool | None
    shown_by_importance: bool | None
    shown_by_candidate: bool | None
    old_rule_dropped: bool
    ok: bool
    problem: str = ""
    guarded: bool | None = None  # other-entity: a wrong "supersedes" verdict was refused
    judged: int = 0  # second (judge) calls the case needed


async def evaluate(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    corpus: dict[str, Any],
    *,
    compare: bool = False,
) -> list[CaseResult]:
    """Run every case of `corpus` through the real pipeline (one new person each); with
    `compare`, also the other selections and, for other-entity cases, a wrong verdict."""
    running = asyncio.Semaphore(CONCURRENT)

    async def one(case: dict[str, Any]) -> CaseResult:
        async with running:
            return await _case(sessions, embedder, corpus, case, compare=compare)

    return list(await asyncio.gather(*(one(case) for case in corpus["cases"])))


async def _case(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    corpus: dict[str, Any],
    case: dict[str, Any],
    *,
    compare: bool,
) -> CaseResult:
    repo = SqlMemoryRepository(sessions, embedder, _Clock())
    user_id, items = await _person(sessions, repo, corpus, case["person"])
    target_key = case.get("corrects") or case.get("same_as") or case.get("protects")
    target = items.get(target_key) if target_key else None
    session_id = await _said(sessions, user_id, case["said"])
    verdict = None
    if target is not None and case["label"] in ("update", "same"):
        verdict = ("supersedes" if case["label"] == "update" else "same_as", target.label)
    model = _ScriptedModel(case["candidate"], verdict)
    compared = compare and target is not None
    by_importance = (
        compared
        and target is not None
        and target.id in {m.id for m in await repo.live(user_id, limit=KNOWN_IN_PROMPT)}
    )
    by_candidate = (
        compared
        and target is not None
        and await _by_candidate(sessions, embedder, user_id, case, target)
    )
    outcome = await extract_session(
        user_id=user_id,
        session_id=session_id,
        sessions=sessions,
        memories=repo,
        llm=model,
        embedder=embedder,
        clock=_Clock(),
        timezone="UTC",
    )
    live = {m.id for m in await repo.live(user_id, limit=500)}
    ok, problem = _judge(case, target, outcome.added, outcome.updated, live)
    return CaseResult(
        id=case["id"],
        label=case["label"],
        shown=None if target is None else target.label in model.shown,
        shown_by_importance=by_importance if compared else None,
        shown_by_candidate=by_candidate if compared else None,
        old_rule_dropped=await _old_rule_dropped(embedder, case, target),
        ok=ok,
        problem=problem,
        guarded=await _guarded(sessions, embedder, corpus, case) if compare else None,
        judged=model.judged,
    )


async def _guarded(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    corpus: dict[str, Any],
    case: dict[str, Any],
) -> bool | None:
    """An other-entity case once more, with a model that wrongly says the candidate
    supersedes the person's own fact: does the code refuse?"""
    if case["label"] != "other_entity" or not case.get("protects"):
        return None
    repo = SqlMemoryRepository(sessions, embedder, _Clock())
    user_id, items = await _person(sessions, repo, corpus, case["person"])
    own = items[case["protects"]]
    session_id = await _said(sessions, user_id, case["said"])
    model = _ScriptedModel(case["candidate"], ("supersedes", own.label))
    await extract_session(
        user_id=user_id,
        session_id=session_id,
        sessions=sessions,
        memories=repo,
        llm=model,
        embedder=embedder,
        clock=_Clock(),
        timezone="UTC",
    )
    return own.id in {m.id for m in await repo.live(user_id, limit=500)}


def _judge(
    case: dict[str, Any], target: MemoryItem | None, added: int, updated: int, live: set[int]
) -> tuple[bool, str]:
    """Did the store do what the label calls for (given a correct model)?"""
    label = case["label"]
    if label == "update":
        if target is None or target.id in live or updated != 1:
            return False, f"not superseded (updated={updated})"
    elif label == "same":
        if added or updated or target is None or target.id not in live:
            return False, f"stored again (added={added}, updated={updated})"
    elif target is not None and target.id not in live:
        return False, "the person's own fact was replaced"
    elif added != 1:
        return False, f"not stored (added={added})"
    return True, ""


async def _person(
    sessions: async_sessionmaker[AsyncSession],
    repo: SqlMemoryRepository,
    corpus: dict[str, Any],
    name: str,
) -> tuple[int, dict[str, MemoryItem]]:
    """A new person with `name`'s memories and the background (one bulk insert, as if
    extracted over time); their own items by corpus id."""
    own = corpus["people"][name]
    rows = own + corpus["background"]
    vectors = await repo.embed([row["content"] for row in rows])
    async with sessions.begin() as db:
        user = User(display_name=name, timezone="UTC", memory_seq=len(rows))
        db.add(user)
        await db.flush()
        user_id = user.id
        await db.execute(
            insert(Memory),
            [
                _row(user_id, short_id, row, vector)
                for short_id, (row, vector) in enumerate(zip(rows, vectors, strict=True), 1)
            ],
        )
    by_content = {item.content: item for item in await repo.live(user_id, limit=len(rows))}
    return user_id, {row["id"]: by_content[row["content"]] for row in own}


def _row(user_id: int, short_id: int, row: dict[str, Any], vector: list[float]) -> dict[str, Any]:
    category = row["category"]
    return {
        "user_id": user_id,
        "short_id": short_id,
        "tier": "active" if category in _ACTIVE else "core",
        "category": category,
        "content": row["content"],
        "content_hash": content_hash(row["content"]),
        "importance": row["importance"],
        "confidence": 0.9,
        "source": "extracted",
        "valid_from": NOW,
        "created_at": NOW,
        "embedding": vector,
    }


async def _said(sessions: async_sessionmaker[AsyncSession], user_id: int, text: str) -> int:
    async with sessions.begin() as db:
        session = SessionRow(user_id=user_id, started_at=NOW, last_message_at=NOW)
        db.add(session)
        await db.flush()
        db.add(
            Message(
                user_id=user_id,
                session_id=session.id,
                role="user",
                content=text,
                platform="bench",
                created_at=NOW,
            )
        )
        return session.id


async def _by_candidate(
    sessions: async_sessionmaker[AsyncSession],
    embedder: Embedder,
    user_id: int,
    case: dict[str, Any],
    target: MemoryItem,
) -> bool:
    """Would a selection on the candidate's own text have shown the target?"""
    found = await relevant_memories(
        sessions,
        embedder,
        user_id=user_id,
        texts=[case["candidate"]["content"]],
        now=NOW,
        limit=KNOWN_IN_PROMPT,
    )
    return any(item.id == target.id for item in found)


async def _old_rule_dropped(
    embedder: Embedder, case: dict[str, Any], target: MemoryItem | None
) -> bool:
    """An update the old reconcile would have skipped as a near-duplicate."""
    if case["label"] != "update" or target is None:
        return False
    vectors = await embedder.embed([case["candidate"]["content"], target.content])
    return float(vectors[0] @ vectors[1]) >= OLD_DUPLICATE


def recall(results: Sequence[CaseResult], labels: Sequence[str] = ("update",)) -> float:
    """The share of cases with one of `labels` whose target the model was shown."""
    with_target = [r for r in results if r.label in labels and r.shown is not None]
    return sum(bool(r.shown) for r in with_target) / max(1, len(with_target))


def report(results: Sequence[CaseResult], seconds: float) -> list[str]:
    """The printed report, ending with the figure lines."""
    labels = ("update", "same", "other_entity", "unrelated")
    lines = [
        f"Correction corpus: {len(results)} cases through extract_session on PostgreSQL "
        f"with MiniLM in {seconds:.1f} s.",
        "",
        f"{'label':<14}{'cases':>6}{'shown':>8}{'by importance':>15}{'by candidate':>14}"
        f"{'stored right':>14}",
    ]
    for label in labels:
        rows = [r for r in results if r.label == label]
        targeted = [r for r in rows if r.shown is not None]
        lines.append(
            f"{label:<14}{len(rows):>6}"
            + (
                f"{_share(targeted, 'shown'):>8}{_share(targeted, 'shown_by_importance'):>15}"
                f"{_share(targeted, 'shown_by_candidate'):>14}"
                if targeted
                else f"{'-':>8}{'-':>15}{'-':>14}"
            )
            + f"{sum(r.ok for r in rows):>9}/{len(rows)}"
        )
    dropped = sum(r.old_rule_dropped for r in results)
    lines += [
        "",
        "shown: the target memory was in the extraction prompt (window recall + named",
        "  people/places/things + standing); by importance: it would have been among the 40",
        "  most important (the old prompt); by candidate: a selection on the candidate's",
        "  own text would have shown it.",
        f"Updates the old similarity rule (cosine >= {OLD_DUPLICATE}) dropped as duplicates: "
        f"{dropped}.",
        f"Cases that needed the second (judge) call: {sum(r.judged > 0 for r in results)}.",
    ]
    figures = [
        f"figure reconcile_candidate_recall {recall(results):.2f} ratio",
        f"figure reconcile_same_recall {recall(results, ('same',)):.2f} ratio",
        f"figure reconcile_stored_right {sum(r.ok for r in results) / len(results):.2f} ratio",
    ]
    if any(r.shown_by_importance is not None for r in results):
        baseline = _baseline(results)
        figures.append(f"figure reconcile_importance_baseline_recall {baseline:.2f} ratio")
    guarded = [r for r in results if r.guarded is not None]
    if guarded:
        refused = sum(bool(r.guarded) for r in guarded) / len(guarded)
        lines.append(f"Other-entity cases where a wrong verdict was refused in code: {refused:.2f}")
        figures.append(f"figure reconcile_other_entity_guard {refused:.2f} ratio")
    lines += [
        f"  {r.id} {r.label}: shown={r.shown} {r.problem}".rstrip()
        for r in results
        if r.shown is False or not r.ok
    ]
    lines += [
        f"  {r.id} other_entity: a wrong verdict replaced the person's own fact"
        for r in guarded
        if not r.guarded
    ]
    return [*lines, "", *figures]


def _share(rows: Sequence[CaseResult], attribute: str) -> str:
    values = [getattr(r, attribute) for r in rows if getattr(r, attribute) is not None]
    return f"{sum(values) / len(values):.2f}" if values else "-"


def _baseline(results: Sequence[CaseResult]) -> float:
    updates = [r for r in results if r.label == "update" and r.shown_by_importance is not None]
    return sum(bool(r.shown_by_importance) for r in updates) / max(1, len(updates))


def load(path: Path = CORPUS) -> dict[str, Any]:
    """The corpus as stored."""
    corpus: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return corpus


async def run(path: Path) -> list[CaseResult]:
    """Evaluate the corpus on an embedded PostgreSQL and print the report."""
    corpus = load(path)
    embedder = RecentEmbeddings(MiniLMEmbedder(), 4096)  # each distinct text embedded once
    with tempfile.TemporaryDirectory(prefix="reconcile-") as data_dir:
        server = start_embedded(Path(data_dir))
        engine = create_engine(server.url, pool_size=CONCURRENT * 2)
        try:
            await migrate(engine, embedding_dim=embedder.dim)
            started = time.perf_counter()
            results = await evaluate(session_factory(engine), embedder, corpus, compare=True)
            seconds = time.perf_counter() - started
        finally:
            await engine.dispose()
            server.stop()
    print("\n".join(report(results, seconds)))
    return results


def main(argv: Sequence[str] = sys.argv[1:]) -> None:
    """Run the benchmark on the given corpus or the project's own."""
    configure_logging("WARNING")
    asyncio.run(run(Path(argv[0]) if argv else CORPUS))


if __name__ == "__main__":
    main()
