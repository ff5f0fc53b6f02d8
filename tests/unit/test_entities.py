"""Names in what was said, the link recall's second hop follows."""

from __future__ import annotations

from memory.recall.entities import linked_names, names_in


def test_names_are_capitalised_words_that_do_not_start_a_sentence() -> None:
    said = "Caroline: My sister Anna had a baby. We called her Rosa! I'm so happy, OK?"
    assert names_in(said) == ["Anna", "Rosa"]


def test_linked_names_skip_what_the_query_says_and_keep_the_best_first() -> None:
    best = ["Took Pickle to Dr Okafor", "We met Anna and Pickle at the Lido"]
    assert linked_names(best, "what did the vet say about pickle?", limit=3) == [
        "Dr",
        "Okafor",
        "Anna",
    ]
    assert linked_names([], "anything", limit=3) == []
