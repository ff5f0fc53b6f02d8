"""Noticing that a candidate memory ends, negates or changes a known fact ("no longer",
"used to", "quit", "stopped", "not … any more", "moved", "ex-") and whether it is about
the same thing as a known memory once those words are set aside. Pure text rules, used
by reconcile when the model gave no verdict."""

from __future__ import annotations

import re

ENDING = re.compile(
    r"\b(?:no\s+longer|used\s+to|quit(?:s|ting)?|stopped|stops|gave\s+up|given\s+up"
    r"|moved|former(?:ly)?|not\b[^.;]*?\bany\s*more)\b|\bex-|n't\b[^.;]*?\bany\s*more\b",
    re.IGNORECASE,
)
_CUE_TEXT = (
    "no longer used to quit quits quitting stopped stops gave given up moved ex former "
    "formerly not any more anymore n't"
)
_FILLER_TEXT = (
    "the person person's they them their theirs is are was were has have had a an it "
    "this that of to and or but at in on for with as be been being does do did who "
    "which now again still"
)
_CUE_WORDS = frozenset(_CUE_TEXT.split())
_FILLER = frozenset(_FILLER_TEXT.split())
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
MIN_SHARED = 2


def has_ending(text: str) -> bool:
    """Whether `text` says something ended, stopped or changed."""
    return ENDING.search(text) is not None


def content_words(text: str) -> set[str]:
    """The words that say what a fact is about, without cue and filler words, lightly
    stemmed ("drinks" → "drink")."""
    words: set[str] = set()
    for match in _WORD.finditer(text.casefold()):
        word = match.group(0).removesuffix("'s")
        if word in _CUE_WORDS or word in _FILLER:
            continue
        words.add(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return words


def overlap(new: str, old: str) -> float:
    """How much of the smaller fact's content words the other one shares (0 when they
    share fewer than two)."""
    a, b = content_words(new), content_words(old)
    shared = len(a & b)
    if shared < MIN_SHARED or not a or not b:
        return 0.0
    return shared / min(len(a), len(b))
