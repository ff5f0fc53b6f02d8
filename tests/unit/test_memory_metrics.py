"""The memory counters of /metrics: the block's tokens, cuts, recalls per prompt by need,
degraded turns by reason, and unsure items by outcome."""

from __future__ import annotations

from bot import metrics
from memory.store.records import MemoryUse


def value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_memory_block_is_observed_with_its_tokens_cut_recalls_and_degradation() -> None:
    tokens = value("companion_memory_block_tokens_sum")
    cuts = value("companion_memory_block_cut_total")
    recalls = value("companion_recalled_items_sum", need="past")
    prompts = value("companion_recalled_items_count", need="past")
    degraded = value("companion_degraded_turns_total", reason="recall_timeout")
    metrics.record_memory_block(MemoryUse(420, True, 5, "recall_timeout"), need="past")
    metrics.record_memory_block(MemoryUse(300, False, 2), need="past")
    assert value("companion_memory_block_tokens_sum") == tokens + 720
    assert value("companion_memory_block_cut_total") == cuts + 1
    assert value("companion_recalled_items_sum", need="past") == recalls + 7
    assert value("companion_recalled_items_count", need="past") == prompts + 2
    assert value("companion_degraded_turns_total", reason="recall_timeout") == degraded + 1


def test_unsure_outcomes_are_counted_and_an_unknown_one_is_not() -> None:
    before = {o: value("companion_unsure_items_total", outcome=o) for o in metrics.UNSURE_OUTCOMES}
    metrics.record_unsure("asked")
    metrics.record_unsure("asked")
    metrics.record_unsure("confirmed")
    metrics.record_unsure("rejected")
    metrics.record_unsure("maybe")  # a caller's typo never breaks its caller, nor counts
    after = {o: value("companion_unsure_items_total", outcome=o) for o in metrics.UNSURE_OUTCOMES}
    assert {o: after[o] - before[o] for o in after} == {"asked": 2, "confirmed": 1, "rejected": 1}
    assert value("companion_unsure_items_total", outcome="maybe") == 0


def test_the_exposition_names_the_memory_metrics() -> None:
    text = metrics.exposition().decode()
    for name in (
        "companion_memory_block_tokens",
        "companion_memory_block_cut_total",
        "companion_recalled_items",
        "companion_degraded_turns_total",
        "companion_unsure_items_total",
    ):
        assert name in text
