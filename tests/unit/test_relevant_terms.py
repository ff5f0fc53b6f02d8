"""Pure rules of what extraction shows the model and whom a fact is about: the words
naming people, places and things, and the relation a fact's subject has to the person."""

from __future__ import annotations

import pytest

from memory.learning.extraction_prompt import parse_answer
from memory.recall.relevant import kin_terms, named_terms, names, owner_kin, query_pieces
from memory.recall.retrieval import MAX_QUERY_CHARS


def test_names_relations_and_attribute_groups_are_the_terms() -> None:
    terms = named_terms("My sister Maja's birthday is 3 May. I quit my job at Novo!")
    assert {"sister", "maja", "may", "novo", "birthday", "born"} <= set(terms)
    assert {"work", "works", "employer"} <= set(terms)  # "quit" is about a job
    assert not {"my", "i", "is"} & set(terms)
    assert all(term.isalpha() and term.islower() for term in terms)  # safe in a tsquery


def test_sentence_openers_and_weekdays_are_not_names() -> None:
    assert named_terms("Yes! Today I went out. Monday was fine. Well, Anyway.") == []
    assert names("The person moved to Berlin with Tomáš") == {"berlin", "tomáš"}


@pytest.mark.parametrize(
    ("text", "about"),
    [
        ("The person's sister Maja has her birthday on 3 May", {"sister"}),
        ("Their best friend Tom works as a chef", {"friend"}),
        ("The person's father's friend Kenji is retired", {"father", "friend"}),
        ("The person's husband Tomáš died in the winter", {"partner"}),
        ("Ana's brother lives in Rome", {"brother"}),
        ("The person has two children, Léa and Hugo", set()),
        ("The person quit their job because of their boss", {"boss"}),
        ("The person lives with a sister", set()),
    ],
)
def test_a_fact_is_about_someone_else_when_a_possessive_names_them(
    text: str, about: set[str]
) -> None:
    assert owner_kin(text) == about


def test_every_kind_of_partner_is_one_relation() -> None:
    assert kin_terms("her girlfriend, his wives, my fiance and our sisters") == [
        "partner",
        "sister",
    ]


def test_long_texts_become_a_few_whole_queries() -> None:
    pieces = query_pieces(["short one", "x" * (MAX_QUERY_CHARS * 3), "", "last", "words"])
    assert pieces == ["short one", *["x" * MAX_QUERY_CHARS] * 3, "last\nwords"]
    assert len(query_pieces(["word " * 400] * 40)) == 8


def test_each_item_is_validated_on_its_own() -> None:
    good = {
        "content": "The person loves jazz",
        "category": "preference",
        "tier": "core",
        "importance": 6,
        "confidence": 0.9,
        "evidence_message_ids": [1],
        "same_as": "m3",
    }
    answer = parse_answer({"memories": [good, good | {"tier": "forever"}, 7]})
    assert [m.same_as for m in answer.memories] == ["m3"]
    assert answer.invalid == ["tier:literal_error", "item:model_type"]
    for unusable in ({"facts": []}, {"memories": "none"}, ["memories"], None):
        with pytest.raises(ValueError, match="no memories list"):
            parse_answer(unusable)
