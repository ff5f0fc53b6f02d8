"""Names in what was said: the link a second hop of recall follows.

A question often names one thing and needs another ("what did the vet say about my
dog?": the dog is Pickle, and the turns about the vet say "Pickle"). Recall's first hop
finds the turns about the question; the names in them (capitalised words that do not
start a sentence, so people, pets, places, titles) are then looked for in the second.
Pure text work, no I/O.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z][\w'’-]*|[.!?:;\"“”()\[\]\n]")
_BOUNDARY = frozenset('.!?:;"“”()[]\n')
_NOT_NAMES = frozenset({"I", "I'm", "I’m", "I've", "I’ve", "I'll", "I’ll", "I'd", "I’d", "OK"})


def names_in(text: str) -> list[str]:
    """Capitalised words that do not start a sentence (or a quote), in order of first use."""
    names: dict[str, None] = {}
    boundary = True
    for token in _TOKEN.findall(text):
        if token in _BOUNDARY:
            boundary = True
            continue
        if not boundary and token[0].isupper() and token not in _NOT_NAMES:
            names.setdefault(token)
        boundary = False
    return list(names)


def linked_names(texts: list[str], query: str, *, limit: int) -> list[str]:
    """Up to `limit` names from `texts` (best first) that `query` does not already use."""
    asked = {word.lower() for word in re.findall(r"[\w'’-]+", query)}
    found: dict[str, None] = {}
    for text in texts:
        for name in names_in(text):
            if name.lower() not in asked:
                found.setdefault(name)
    return list(found)[:limit]
