"""The rule for changing what the person set themselves or pinned: their own words this
turn, never the model's claim."""

from __future__ import annotations

import pytest

from bot.memory_consent import names_label, person_allows
from bot.memory_tools import parse_label

MEMORY = "They are allergic to penicillin"


@pytest.mark.parametrize(
    ("words", "short_id", "named"),
    [
        ("please drop m12", 12, True),
        ("M12 is wrong", 12, True),
        ("#m12 is wrong", 12, True),
        ("forget m12.", 12, True),
        ("forget m123", 12, False),
        ("forget m1", 12, False),
        ("form12 is a form", 12, False),
        ("forget 12", 12, False),
    ],
)
def test_the_id_names_one_memory_only(words: str, short_id: int, named: bool) -> None:
    assert names_label(words, short_id) is named


@pytest.mark.parametrize(
    ("words", "change", "quote", "allowed"),
    [
        # The person's own words, quoted: allowed.
        (
            "Please forget that I'm allergic to penicillin.",
            "forget",
            "forget that I'm allergic",
            True,
        ),
        ("please   FORGET my Penicillin thing", "forget", "forget my penicillin thing", True),
        (
            "it’s not penicillin actually, it's amoxicillin",
            "update",
            "not penicillin actually",
            True,
        ),
        (
            "I'm no longer allergic to penicillin",
            "update",
            "no longer allergic to penicillin",
            True,
        ),
        # No quote, or a quote the person never wrote.
        ("Please forget that I'm allergic to penicillin.", "forget", None, False),
        ("I had a rough day", "forget", "please forget my penicillin allergy", False),
        # Their words, but asking for another change.
        ("forget my penicillin allergy", "update", "forget my penicillin allergy", False),
        ("actually penicillin is fine", "forget", "actually penicillin is fine", False),
        # Their words asking for a change, about something else.
        ("forget the walks by the harbour", "forget", "forget the walks by the harbour", False),
        # Too short to say anything.
        ("forget it", "forget", "forget", False),
        # A quote that is the whole message but with no request at all.
        ("I'm allergic to penicillin", "forget", "I'm allergic to penicillin", False),
    ],
)
def test_a_quote_must_be_theirs_ask_for_this_change_and_be_about_the_memory(
    words: str, change: str, quote: str | None, allowed: bool
) -> None:
    assert (
        person_allows(words, short_id=3, memory_text=MEMORY, change=change, quote=quote)  # type: ignore[arg-type]
        is allowed
    )


def test_the_id_in_their_words_is_enough_without_a_quote() -> None:
    assert person_allows(
        "m3 is out of date", short_id=3, memory_text=MEMORY, change="update", quote=None
    )
    assert not person_allows(
        "m4 is out of date", short_id=3, memory_text=MEMORY, change="update", quote=None
    )


@pytest.mark.parametrize(
    ("text", "short_id"),
    [
        ("m12", 12),
        ("M12", 12),
        ("#12", 12),
        ("12", 12),
        (" m7 ", 7),
        ("m", None),
        ("sister", None),
        ("m12 sister", None),
        ("m123456789", None),
    ],
)
def test_a_label_is_an_id_alone(text: str, short_id: int | None) -> None:
    assert parse_label(text) == short_id
