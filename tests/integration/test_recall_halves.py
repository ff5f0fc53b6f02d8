"""Recall's first pass in two halves (words while the query is embedded, vectors once it
is there) on real PostgreSQL: it finds exactly the rows, ranks and coverage that the
one-statement `candidates` finds, for messages and memories, with and without a time
window, a session summary or an excluded session; and it does not wait for the vector
to start ranking by words."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall import retrieval
from memory.recall.embeddings import EmbeddingUnavailable
from memory.recall.minilm import MiniLMEmbedder
from memory.recall.retrieval import Candidate, candidates, first_pass, recall
from memory.recall.when import time_window
from memory.store.conversations import SqlConversationStore
from tests.conftest import FakeClock
from tests.integration.test_recall_hops import session_of
from tests.integration.test_retrieval import remember, say

Sessions = async_sessionmaker[AsyncSession]
DAYS = [
    ["My sister Anna is getting married in Lisbon", "I need a dress for the wedding"],
    ["Work was hectic, the presentation is on Friday", "I practised it twice tonight"],
    ["We adopted a kitten called Pepper!", "She sleeps on my keyboard"],
    ["Anna called about the seating plan", "It went fine in the end"],
    ["Made lentil soup, it reminded me of home", "Mum's recipe is still the best"],
    ["The presentation went really well", "My manager said so too"],
]
MEMORIES: list[tuple[str, dict[str, Any]]] = [
    (
        "Their sister Anna is getting married in Lisbon",
        {"category": "event", "tier": "active", "event_at": datetime(2026, 2, 27, 10, tzinfo=UTC)},
    ),
    ("Has a kitten called Pepper", {}),
    ("Gets stressed before presentations at work", {"importance": 8.0}),
    ("Loves lentil soup, their mother's recipe", {"tier": "active"}),
    ("Is afraid of flying", {"confidence": 0.6}),
]
QUERIES = [
    "how did my presentation go?",
    "what did Anna say last week?",
    "what did I cook three days ago?",
    "tell me about the kitten",
    "anything about flying or Lisbon?",
    "'quoted' \\ odd & | ! words",
]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One loaded MiniLM for the module."""
    return MiniLMEmbedder()


async def seeded(db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock) -> tuple[int, int]:
    """A person with six days of conversation (the fourth summarised) and five
    memories; returns the person and the last session."""
    store = SqlConversationStore(db, embedder)
    start = clock.now() - timedelta(days=len(DAYS))
    alice = 0
    ids: list[list[int]] = []
    for day, lines in enumerate(DAYS):
        ids.append([])
        for i, line in enumerate(lines):
            at = start + timedelta(days=day, minutes=i)
            alice, message_id = await say(store, "alice", line, at, f"{day}-{i}")
            ids[-1].append(message_id)
    await store.save_summary(
        user_id=alice,
        session_id=await session_of(db, ids[3][0]),
        summary="Alice talked about her sister Anna's wedding plans and the seating.",
        through_id=ids[3][-1],
    )
    for content, columns in MEMORIES:
        await remember(db, embedder, alice, content, clock.now(), **columns)
    return alice, await session_of(db, ids[-1][0])


def by_row(found: list[Candidate]) -> dict[tuple[str, int], Candidate]:
    return {(c.kind, c.id): c for c in found}


async def test_the_halves_find_what_one_statement_finds(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice, last_session = await seeded(db, embedder, clock)
    now = clock.now()
    seen: set[str] = set()
    for query in QUERIES:
        vector = [float(x) for x in (await embedder.embed([query]))[0]]
        window = time_window(query, now)
        for exclude in (None, last_session):
            for per_list in (50, 2):
                got_vector, halves, _ = await first_pass(
                    db,
                    _ready(vector),
                    user_id=alice,
                    query=query,
                    messages=True,
                    memories=True,
                    dim=embedder.dim,
                    exclude_session_id=exclude,
                    per_list=per_list,
                    window=window,
                )
                whole = [
                    c
                    for kind in ("message", "memory")
                    for c in await candidates(
                        db,
                        user_id=alice,
                        query=query,
                        query_vector=vector,
                        messages=kind == "message",
                        memories=kind == "memory",
                        exclude_session_id=exclude,
                        per_list=per_list,
                        window=window,
                    )
                ]

                assert got_vector == vector
                expected, got = by_row(whole), by_row(halves)
                assert got.keys() == expected.keys(), query
                for key, row in expected.items():
                    assert math.isclose(got[key].coverage, row.coverage, abs_tol=1e-9)
                    assert got[key] == replace(row, coverage=got[key].coverage)
                seen |= {
                    f"{c.kind} {name}"
                    for c in whole
                    for name in ("vector_rank", "text_rank", "window_rank", "session_rank")
                    if getattr(c, name) is not None
                }
    # The comparison saw rows in every list of both kinds.
    assert seen == {
        "message vector_rank", "message text_rank", "message window_rank",
        "message session_rank", "memory vector_rank", "memory text_rank", "memory window_rank",
    }  # fmt: skip


async def _ready(vector: list[float]) -> list[float]:
    return vector


async def test_words_are_ranked_before_the_vector_is_ready(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, _ = await seeded(db, embedder, clock)
    query = "how did my presentation go?"
    vector = [float(x) for x in (await embedder.embed([query]))[0]]
    words_done = asyncio.Event()
    order: list[str] = []
    original = retrieval._half

    async def watched(sessions: Sessions, half: retrieval.Half, **kwargs: Any) -> Any:
        result = await original(sessions, half, **kwargs)
        order.append(half)
        if all(h in order for h in ("message words", "memory words")):
            words_done.set()
        return result

    async def slow_vector() -> list[float]:
        # The "embedding" ends only once both word halves have been ranked.
        await asyncio.wait_for(words_done.wait(), timeout=10)
        order.append("vector")
        return vector

    monkeypatch.setattr(retrieval, "_half", watched)
    _, found, _ = await first_pass(
        db,
        slow_vector(),
        user_id=alice,
        query=query,
        messages=True,
        memories=True,
        dim=embedder.dim,
    )

    assert order.index("vector") == 2
    assert sorted(order[3:]) == ["memory vectors", "message vectors"]
    assert any(c.text_rank == 1 for c in found)
    assert any(c.vector_rank == 1 for c in found)


async def test_recall_finds_the_same_either_way(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice, last_session = await seeded(db, embedder, clock)
    for query in QUERIES:
        for exclude in (None, last_session):
            ways = [
                await recall(
                    db,
                    embedder,
                    user_id=alice,
                    query=query,
                    k=8,
                    now=clock.now(),
                    exclude_session_id=exclude,
                    overlap=overlap,
                )
                for overlap in (True, False)
            ]
            assert ways[0] == ways[1], query
            assert ways[0] or query.startswith("'")


class Failing:
    """MiniLM's width, but every embedding fails with `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.dim = 384
        self.name = "failing"

    async def embed(self, texts: list[str]) -> Any:
        await asyncio.sleep(0)
        raise self.error


async def test_without_a_vector_recall_still_ranks_by_words_and_a_crash_is_not_swallowed(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice, _ = await seeded(db, embedder, clock)
    asked = "how did the presentation go?"

    found = await recall(
        db, Failing(EmbeddingUnavailable("503")), user_id=alice, query=asked, k=3, now=clock.now()
    )
    assert found and all("presentation" in r.content.lower() for r in found)

    with pytest.raises(ValueError, match="broken"):
        await asyncio.wait_for(
            recall(db, Failing(ValueError("broken")), user_id=alice, query=asked, now=clock.now()),
            timeout=10,
        )
