"""The cue rule reconcile uses when the model gave no verdict: a candidate that ends or
negates a fact, and whether it says the same thing as a known one without the cue."""

from __future__ import annotations

import pytest

from memory.learning.endings import content_words, has_ending, overlap


@pytest.mark.parametrize(
    "text",
    [
        "The person no longer drinks coffee every morning",
        "The person used to live in Porto",
        "The person has quit smoking",
        "The person stopped bouldering after a shoulder injury",
        "The person is not vegetarian any more",
        "The person doesn't eat meat anymore",
        "The person moved to Kyoto",
        "The person's ex-boyfriend Tom lives in Oslo",
        "The person gave up sugar",
    ],
)
def test_an_ending_or_negation_is_a_cue(text: str) -> None:
    assert has_ending(text)


@pytest.mark.parametrize(
    "text",
    [
        "The person drinks coffee every morning",
        "The person lives in Porto",
        "The person is vegetarian",
        "The person's sister is expecting a baby",
        "The person is not sure about the new job",  # a negation that ends nothing
    ],
)
def test_a_plain_fact_has_no_cue(text: str) -> None:
    assert not has_ending(text)


def test_cue_and_filler_words_are_set_aside() -> None:
    assert content_words("The person no longer drinks coffee every morning") == {
        "drink",
        "coffee",
        "every",
        "morning",
    }


def test_the_same_fact_without_the_cue_overlaps_fully() -> None:
    new = "The person no longer drinks coffee every morning"
    assert overlap(new, "The person drinks coffee every morning") == 1.0


def test_different_facts_hardly_overlap() -> None:
    new = "The person no longer drinks coffee every morning"
    assert overlap(new, "The person walks the dog every morning") < 0.6
    assert overlap("The person quit the choir", "The person sings in a choir") == 0.0
