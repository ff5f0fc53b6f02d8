"""The pure parts of `/link`: codes people can read and type, and the test for two
statements that say the same thing of a different value."""

from __future__ import annotations

import pytest

from memory.care.link_memories import same_frame
from memory.store.link_codes import ALPHABET, hash_code, new_code, normalize_code


def test_codes_are_eight_unambiguous_characters_shown_in_two_halves() -> None:
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200
    for code in codes:
        assert len(code) == 9 and code[4] == "-"
        assert set(code.replace("-", "")) <= set(ALPHABET)
    assert not set("01OIL") & set(ALPHABET)


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [("ABCD-EFGH", "ABCDEFGH"), (" abcd efgh ", "ABCDEFGH"), ("abcdefgh", "ABCDEFGH")],
)
def test_case_spaces_and_dashes_do_not_matter(typed: str, canonical: str) -> None:
    assert normalize_code(typed) == canonical


@pytest.mark.parametrize(
    "typed", ["", "ABCD-EFG", "ABCD-EFGHJ", "ABCD-EFG0", "ABCD-EFGI", "ÄBCD-EFGH"]
)
def test_anything_else_is_not_a_code(typed: str) -> None:
    assert normalize_code(typed) is None


def test_the_stored_hash_does_not_contain_the_code() -> None:
    digest = hash_code("ABCDEFGH")
    assert len(digest) == 64 and "ABCDEFGH" not in digest.upper()
    assert digest != hash_code("ABCDEFGJ")


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("I live in Paris", "I live in Berlin", True),
        ("My sister is called Ana.", "My sister is called Eva", True),
        ("I work as a nurse at the clinic", "I work as a teacher at the clinic", True),
        ("I have a cat named Miso", "I play the cello", False),
        ("I live in Paris", "I live in Paris", False),
        ("I like tea", "My brother likes tea a lot", False),
    ],
)
def test_same_frame_spots_a_different_value_in_the_same_words(
    a: str, b: str, expected: bool
) -> None:
    assert same_frame(a, b) is expected
