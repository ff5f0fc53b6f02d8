"""Session summaries as recall units on real PostgreSQL: each sentence of a summary is
embedded on its own, a question matching one of them in meaning (not words) finds that
session, and the vectors are written, cleared and re-embedded with the summary."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.care.erasure import hide_sources
from memory.recall.embeddings import WordLlamaEmbedder
from memory.recall.minilm import MiniLMEmbedder
from memory.recall.reembed import reembed
from memory.recall.retrieval import DEFAULT_TUNING, recall
from memory.store.conversations import SqlConversationStore
from memory.store.summary_units import MAX_UNITS, summary_sentences
from tests.conftest import FakeClock
from tests.integration.test_recall_hops import history, session_of

Sessions = async_sessionmaker[AsyncSession]
NO_UNITS = replace(DEFAULT_TUNING, unit_weight=0.0)
SUMMARY = (
    "Alice caught up about her week and seemed cheerful. "
    "She described how her interview for the head baker position went on Tuesday. "
    "Her cousin is visiting from Oslo next month."
)


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One loaded MiniLM for the module."""
    return MiniLMEmbedder()


async def summarised_twins(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> tuple[SqlConversationStore, int, list[list[int]], int]:
    """Two days of the same words; the older day's session carries `SUMMARY`."""
    days = [["It went fine in the end", "They were kind about it"]] * 2
    store, alice, ids = await history(db, embedder, clock, days)
    first = await session_of(db, ids[0][0])
    await store.save_summary(
        user_id=alice, session_id=first, summary=SUMMARY, through_id=ids[0][-1]
    )
    return store, alice, ids, first


async def unit_dims(db: Sessions, session_id: int) -> list[int] | None:
    """The widths of a session's summary vectors (None: it has none)."""
    async with db() as s:
        return (
            await s.execute(
                text(
                    "SELECT array(SELECT vector_dims(u) FROM unnest(summary_vectors) AS u) "
                    "FROM sessions WHERE id = :id AND summary_vectors IS NOT NULL"
                ),
                {"id": session_id},
            )
        ).scalar()


def test_a_summary_splits_into_its_sentences() -> None:
    assert summary_sentences(SUMMARY) == [
        "Alice caught up about her week and seemed cheerful.",
        "She described how her interview for the head baker position went on Tuesday.",
        "Her cousin is visiting from Oslo next month.",
    ]
    assert summary_sentences("Fine. \n\nThey talked about (the) garden!  Ok?") == [
        "They talked about (the) garden!"
    ]
    assert summary_sentences("") == []
    assert len(summary_sentences("They talked about it. " * 100)) == MAX_UNITS


async def test_a_summary_sentence_matching_in_meaning_finds_its_session(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    _, alice, ids, first = await summarised_twins(db, embedder, clock)

    asked = "how did my job application at the bakery turn out?"  # no word of the summary's
    found = await recall(db, embedder, user_id=alice, query=asked, k=2, now=clock.now())
    without = await recall(
        db, embedder, user_id=alice, query=asked, k=2, now=clock.now(), tuning=NO_UNITS
    )

    assert await unit_dims(db, first) == [embedder.dim] * 3
    assert {r.id for r in found} == set(ids[0])  # both turns of the interview's day
    assert without == []  # no word in common, turns too far in meaning: nothing at all


async def test_forgetting_drops_the_summary_vectors_with_the_summary(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    _, alice, ids, first = await summarised_twins(db, embedder, clock)

    await hide_sources(db, user_id=alice, message_ids=[ids[0][0]])

    assert await unit_dims(db, first) is None
    asked = "how did my job application at the bakery turn out?"
    found = await recall(db, embedder, user_id=alice, query=asked, k=4, now=clock.now())
    assert ids[0][1] not in {r.id for r in found[:2]}  # no longer lifted by the summary


async def test_vectors_of_another_width_are_skipped_and_reembed_writes_them_again(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    old = WordLlamaEmbedder(256)
    _, alice, ids, first = await summarised_twins(db, embedder, clock)
    await SqlConversationStore(db, old).save_summary(
        user_id=alice, session_id=first, summary=SUMMARY, through_id=ids[0][-1]
    )
    assert await unit_dims(db, first) == [256] * 3

    asked = "how did my job application at the bakery turn out?"
    stale = await recall(db, embedder, user_id=alice, query=asked, k=2, now=clock.now())
    assert stale == []  # compared with nothing (and no error)

    seen: list[tuple[int, int]] = []
    count = await reembed(db, embedder, progress=lambda done, total: seen.append((done, total)))

    assert await unit_dims(db, first) == [embedder.dim] * 3
    assert seen[-1] == (count, count)
    found = await recall(db, embedder, user_id=alice, query=asked, k=2, now=clock.now())
    assert {r.id for r in found} == set(ids[0])


async def test_a_summary_without_an_embedder_has_no_vectors(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    days = [["We planted tomatoes"]]
    _, alice, ids = await history(db, embedder, clock, days)
    session_id = await session_of(db, ids[0][0])

    await SqlConversationStore(db).save_summary(
        user_id=alice, session_id=session_id, summary=SUMMARY, through_id=ids[0][-1]
    )

    assert await unit_dims(db, session_id) is None
    found = await recall(
        db, embedder, user_id=alice, query="tomatoes", k=1, now=clock.now() + timedelta(days=1)
    )
    assert [r.id for r in found] == ids[0]
