"""Ranking arithmetic of recall: reciprocal rank fusion and the weights on top of it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memory.recall.retrieval import (
    MAX_QUERY_CHARS,
    Candidate,
    Tuning,
    clean_query,
    feedback_ids,
    fuse,
    fused_score,
    memory_factor,
    recency_factor,
    rrf_score,
)

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def memory(
    id: int,
    vector_rank: int | None,
    text_rank: int | None,
    *,
    importance: float = 5,
    confidence: float = 1.0,
    age_days: float = 0,
) -> Candidate:
    return Candidate(
        kind="memory",
        id=id,
        vector_rank=vector_rank,
        text_rank=text_rank,
        content=f"memory {id}",
        created_at=NOW - timedelta(days=age_days),
        short_id=id,
        tier="core",
        category="fact",
        importance=importance,
        confidence=confidence,
    )


def message(
    id: int,
    vector_rank: int | None,
    text_rank: int | None,
    *,
    coverage: float = 0.0,
) -> Candidate:
    return Candidate(
        kind="message",
        id=id,
        vector_rank=vector_rank,
        text_rank=text_rank,
        content=f"message {id}",
        created_at=NOW,
        role="user",
        platform_message_id=str(id),
        coverage=coverage,
    )


def test_rrf_sums_weighted_reciprocal_ranks_and_skips_missing_lists() -> None:
    assert rrf_score([(1, 1.0), (3, 0.5)], k=60) == pytest.approx(1 / 61 + 0.5 / 63)
    assert rrf_score([(None, 1.0), (2, 1.0)], k=60) == pytest.approx(1 / 62)
    assert rrf_score([(None, 1.0)], k=60) == 0.0


def test_a_row_in_both_lists_beats_rows_in_one() -> None:
    both = memory(1, 5, 5)
    vector_only = memory(2, 1, None)
    text_only = memory(3, None, 1)
    ranked = fuse([vector_only, text_only, both], k=3, now=NOW)
    assert ranked[0].id == 1


def test_recency_halves_towards_the_floor() -> None:
    assert recency_factor(NOW, NOW, 30, 0.6) == pytest.approx(1.0)
    assert recency_factor(NOW - timedelta(days=30), NOW, 30, 0.6) == pytest.approx(0.8)
    assert recency_factor(NOW - timedelta(days=3000), NOW, 30, 0.6) == pytest.approx(0.6)
    assert recency_factor(NOW + timedelta(days=1), NOW, 30, 0.6) == pytest.approx(1.0)


def test_memory_factor_rises_with_importance_and_confidence_and_clamps() -> None:
    assert memory_factor(10, 1.0) == pytest.approx(1.0)
    assert memory_factor(1, 1.0) == pytest.approx(0.55)
    assert memory_factor(10, 0.0) == pytest.approx(0.5)
    assert memory_factor(50, 2.0) == memory_factor(10, 1.0)
    assert memory_factor(-3, -1.0) == memory_factor(1, 0.0)


def test_importance_breaks_a_tie_between_equally_ranked_memories() -> None:
    minor = memory(1, 1, 1, importance=2)
    major = memory(2, 1, 1, importance=9)
    assert [r.id for r in fuse([minor, major], k=2, now=NOW)] == [2, 1]


def test_an_old_memory_ranks_below_an_equally_matching_new_one() -> None:
    old = memory(1, 1, 1, age_days=400)
    new = memory(2, 1, 1, age_days=1)
    assert [r.id for r in fuse([old, new], k=2, now=NOW)] == [2, 1]


def test_messages_rank_below_memories_with_the_same_ranks() -> None:
    said = message(1, 1, 1)
    remembered = memory(2, 1, 1, importance=5, confidence=0.8, age_days=30)
    assert [r.kind for r in fuse([said, remembered], k=2, now=NOW)] == ["memory", "message"]


def test_mode_selects_which_ranks_count() -> None:
    row = message(1, vector_rank=1, text_rank=None)
    tuning = Tuning()
    assert fused_score(row, mode="text", tuning=tuning, now=NOW) == 0.0
    assert fused_score(row, mode="vector", tuning=tuning, now=NOW) > 0.0
    assert fuse([row], k=5, mode="text", now=NOW) == []


def test_fuse_returns_at_most_k_with_the_candidate_fields() -> None:
    rows = [message(i, i, i) for i in range(1, 30)]
    ranked = fuse(rows, k=5, now=NOW)
    assert [r.id for r in ranked] == [1, 2, 3, 4, 5]
    assert ranked[0].platform_message_id == "1" and ranked[0].role == "user"
    assert ranked[0].score > ranked[-1].score


def test_clean_query_drops_nul_bytes_and_bounds_length() -> None:
    assert clean_query("a\x00b") == "a b"
    assert len(clean_query("x" * 10_000)) == MAX_QUERY_CHARS


def test_coverage_lifts_a_ranked_row_by_a_fraction_of_a_first_place_vote() -> None:
    tuning = Tuning(coverage_weight=0.3, message_weight=1.0)
    plain = fused_score(message(1, None, 4), mode="text", tuning=tuning, now=NOW)
    covered = fused_score(message(1, None, 4, coverage=0.5), mode="text", tuning=tuning, now=NOW)
    assert covered - plain == pytest.approx(0.3 * 0.5 / (tuning.rrf_k + 1))
    ranked = fuse([message(1, None, 3), message(2, None, 4, coverage=1.0)], k=2, now=NOW)
    assert [r.id for r in ranked] == [2, 1]


def test_coverage_neither_revives_an_unranked_row_nor_counts_for_vectors() -> None:
    tuning = Tuning()
    unranked = message(1, None, None, coverage=1.0)
    assert fused_score(unranked, mode="hybrid", tuning=tuning, now=NOW) == 0.0
    vector_only = message(2, 1, 5, coverage=1.0)
    assert fused_score(vector_only, mode="vector", tuning=tuning, now=NOW) == pytest.approx(
        tuning.message_weight / (tuning.rrf_k + 1)
    )


def test_feedback_comes_from_the_best_messages_only_when_text_matched() -> None:
    found = [memory(9, 1, 1), message(1, 2, 1), message(2, 1, None), message(3, None, 2)]
    ranked = fuse(found, k=10, now=NOW)
    tuning = Tuning(feedback_docs=2)
    best_messages = [r.id for r in ranked if r.kind == "message"][:2]
    assert feedback_ids(found, ranked, mode="hybrid", tuning=tuning) == best_messages
    assert feedback_ids(found, ranked, mode="vector", tuning=tuning) == []
    off = Tuning(feedback_docs=0)
    assert feedback_ids(found, ranked, mode="hybrid", tuning=off) == []
    no_text = [message(1, 1, None), message(2, 2, None)]
    assert feedback_ids(no_text, fuse(no_text, k=5, now=NOW), mode="hybrid", tuning=tuning) == []


def test_the_window_session_and_name_lists_count_in_hybrid_mode_only() -> None:
    alone = message(1, None, None)
    linked = replace(alone, window_rank=1, session_rank=1, entity_rank=1)
    tuning = Tuning()
    assert fused_score(alone, mode="hybrid", tuning=tuning, now=NOW) == 0.0
    assert fused_score(linked, mode="hybrid", tuning=tuning, now=NOW) > 0.0
    assert fused_score(linked, mode="text", tuning=tuning, now=NOW) == 0.0
