"""When the chat model may change a memory the person set themselves or pinned.

Memories the person told the companion explicitly (source `user`) or pinned are theirs:
the model's `update_memory` and `forget_memory` leave them alone unless the person's own
words in this turn (the messages the reply answers) ask for it. The rule is checked
against what the person wrote, never against what the model claims:

- the person's words name the memory by its id (`m12`, as `/memory` shows it), or
- the tool call quotes the person (`person_asked`), and the quote
  1. is found in the person's words of this turn (case and spacing aside),
  2. asks for this kind of change (forget: "forget", "delete", "remove", …; update:
     "change", "update", "correct", "actually", "no longer", …), and
  3. shares a word of four or more letters with the memory's text.

A model that invents a quote, quotes the person's words about something else, or quotes
a request to forget when it updates, is refused. Pure functions, no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

Change = Literal["update", "forget"]

MIN_QUOTE_CHARS = 8
_WORD = re.compile(r"[^\W\d_]{4,}")
_SPACE = re.compile(r"\s+")
_ASKS: dict[Change, re.Pattern[str]] = {
    "forget": re.compile(
        r"\b(forget|forgets|forgot|delete|remove|erase|drop|scrap|"
        r"stop remembering|don'?t remember|do not remember|unlearn)\b"
    ),
    "update": re.compile(
        r"\b(change|changed|update|updated|correct|correction|edit|fix|actually|wrong|"
        r"instead|no longer|not any ?more|anymore|moved|now it'?s|it'?s now)\b"
    ),
}
_STOP = frozenset(
    [
        "that",
        "this",
        "with",
        "from",
        "have",
        "about",
        "what",
        "when",
        "where",
        "which",
        "would",
        "could",
        "should",
        "their",
        "there",
        "they",
        "them",
        "then",
        "than",
        "your",
        "yours",
        "mine",
        "into",
        "just",
        "like",
        "some",
        "more",
        "most",
        "also",
        "been",
        "were",
        "will",
        "does",
        "done",
        "dont",
        "didnt",
        "isnt",
        "please",
        "remember",
        "forget",
        "delete",
        "remove",
        "change",
        "update",
        "correct",
        "memory",
        "memories",
        "actually",
        "anymore",
        "instead",
    ]
)


def fold(text: str) -> str:
    """Case-, width- and spacing-insensitive text, with typographic apostrophes plain."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("’", "'").replace("‘", "'")
    return _SPACE.sub(" ", folded).strip()


def names_label(words: str, short_id: int) -> bool:
    """Whether the person's `words` name memory `m{short_id}` (as a word of its own)."""
    return re.search(rf"(?<![\w#])#?m{short_id}(?!\d)", fold(words)) is not None


def content_words(text: str) -> set[str]:
    """The words of four or more letters that say what `text` is about."""
    return {w for w in _WORD.findall(fold(text)) if w not in _STOP}


def _shares_word(quote: str, memory_text: str) -> bool:
    ours = content_words(memory_text)
    return any(w in ours or any(o[:5] == w[:5] for o in ours) for w in content_words(quote))


def person_allows(
    words: str, *, short_id: int, memory_text: str, change: Change, quote: str | None
) -> bool:
    """Whether the person's `words` this turn allow the model's `change` of memory
    `m{short_id}` saying `memory_text`, by the rule above."""
    if names_label(words, short_id):
        return True
    if not quote:
        return False
    said = fold(quote).strip(" \"'“”.,!?")
    if len(said) < MIN_QUOTE_CHARS or said not in fold(words):
        return False
    return _ASKS[change].search(said) is not None and _shares_word(said, memory_text)
