"""The labelled correction corpus through the real reconcile path (real PostgreSQL, the
default MiniLM embedder, the real prompt, a scripted model that answers correctly):
every fact a correction replaces is shown to the model, and every case is stored as its
label says — updates supersede, rewordings add nothing, a fact about someone else never
replaces the person's own. `bench/reconcile_recall.py` prints the same figures."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.reconcile_recall import evaluate, load, recall, report
from memory.recall.embeddings import RecentEmbeddings
from memory.recall.minilm import MiniLMEmbedder
from tests.conftest import REPORT_PROPERTY


@pytest.mark.timeout(300)  # 180 cases embedded by MiniLM on two shared cores
async def test_every_correction_is_shown_to_the_model_and_stored_as_labelled(
    db: async_sessionmaker[AsyncSession], record_property: Callable[[str, object], None]
) -> None:
    corpus = load()
    labels = Counter(case["label"] for case in corpus["cases"])
    assert sum(labels.values()) >= 150
    assert set(labels) == {"same", "update", "other_entity", "unrelated"}
    assert all(case["corrects"] for case in corpus["cases"] if case["label"] == "update")

    started = time.perf_counter()
    # The cases share their background memories: each distinct text is embedded once.
    results = await evaluate(db, RecentEmbeddings(MiniLMEmbedder(), 4096), corpus)
    record_property(REPORT_PROPERTY, "\n".join(report(results, time.perf_counter() - started)))

    assert recall(results) == 1.00  # figure reconcile_candidate_recall
    assert recall(results, ("same", "other_entity")) == 1.00
    wrong = [(r.id, r.label, r.problem) for r in results if not r.ok]
    assert wrong == []  # no update dropped, no rewording stored twice, no own fact replaced
