"""Spreading recall over sessions for questions that ask for several things."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memory.recall.retrieval import Candidate, Recalled, Tuning, fuse, second_hop_names
from memory.recall.spread import asks_for_several, one_per_group, spread

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "query",
    [
        "Which cities have I been to?",
        "what books did I read this year",
        "How many games did we win?",
        "what are the names of my cousin's kids",
        "did I ever go skiing?",
        "all the places we talked about",
        "what kinds of music do I like",
        "which of my friends play chess",
    ],
)
def test_a_question_for_a_set_of_things_asks_for_several(query: str) -> None:
    assert asks_for_several(query)


@pytest.mark.parametrize(
    "query",
    [
        "what is my dog called?",
        "which bus do I take to work",
        "what was the class about",
        "what does my sister do for a living?",
        "how was the interview",
        "what kind of art does she make",
        "",
    ],
)
def test_a_question_for_one_thing_does_not(query: str) -> None:
    assert not asks_for_several(query)


def group_of(item: str) -> str | None:
    return item[0] if item[0] != "-" else None


def test_spread_lets_another_group_overtake_a_near_tie() -> None:
    ranked = [(1.00, "a1"), (0.99, "a2"), (0.98, "b1"), (0.50, "a3"), (0.40, "c1")]
    picked = spread(ranked, k=3, decay=0.9, group=group_of, pool=10)
    assert [item for _, item in picked] == ["a1", "b1", "a2"]
    assert [score for score, _ in picked] == [1.00, 0.98, 0.99]  # the original scores


def test_spread_keeps_a_clear_lead_and_never_discounts_ungrouped_items() -> None:
    ranked = [(1.0, "a1"), (0.95, "a2"), (0.5, "b1"), (0.9, "-x"), (0.85, "-y")]
    picked = spread(ranked, k=4, decay=0.97, group=group_of, pool=10)
    assert [item for _, item in picked] == ["a1", "a2", "-x", "-y"]


def test_spread_without_decay_or_beyond_its_pool_is_the_plain_order() -> None:
    ranked = [(1.0, "a1"), (0.99, "a2"), (0.98, "b1")]
    assert spread(ranked, k=3, decay=1.0, group=group_of, pool=10) == ranked
    assert spread(ranked, k=2, decay=0.5, group=group_of, pool=2) == ranked[:2]
    assert spread([], k=3, decay=0.5, group=group_of, pool=10) == []


def test_one_per_group_takes_the_first_of_each_group_in_order() -> None:
    items = ["a1", "a2", "b1", "-x", "b2", "-y", "c1"]
    assert one_per_group(items, group_of, 4) == ["a1", "b1", "-x", "-y"]
    assert one_per_group(items, group_of, 10) == ["a1", "b1", "-x", "-y", "c1"]


def message(id: int, text_rank: int, session_id: int, content: str = "") -> Candidate:
    return Candidate(
        kind="message",
        id=id,
        vector_rank=text_rank,
        text_rank=text_rank,
        content=content or f"message {id}",
        created_at=NOW,
        role="user",
        session_id=session_id,
    )


def test_fuse_spreads_over_sessions_only_when_asked_for_several() -> None:
    rows = [message(1, 1, 10), message(2, 2, 10), message(3, 3, 10), message(4, 4, 20)]
    tuning = Tuning(spread_decay=0.9)
    assert [r.id for r in fuse(rows, k=3, now=NOW, tuning=tuning)] == [1, 2, 3]
    spread_ids = [r.id for r in fuse(rows, k=3, now=NOW, tuning=tuning, several=True)]
    assert spread_ids == [1, 4, 2]
    off = replace(tuning, spread_decay=1.0)
    assert [r.id for r in fuse(rows, k=3, now=NOW, tuning=off, several=True)] == [1, 2, 3]


def recalled(id: int, content: str) -> Recalled:
    return Recalled(kind="message", id=id, content=content, score=1.0, created_at=NOW)


def test_the_second_hop_reads_names_from_the_best_turn_of_each_session() -> None:
    ranked = [
        recalled(1, "We met Tom at the harbour"),
        recalled(2, "and then Tom showed us Lisbon"),
        recalled(3, "My cousin Ines lives in Porto now"),
    ]
    tuning = Tuning(entity_docs=2, entity_names=6)
    assert second_hop_names(ranked, "who did I meet", tuning) == ["Tom", "Lisbon"]
    sessions = {1: 7, 2: 7, 3: 8}
    assert second_hop_names(ranked, "who did I meet", tuning, sessions) == [
        "Tom",
        "Ines",
        "Porto",
    ]
