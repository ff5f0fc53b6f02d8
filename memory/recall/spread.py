"""Spreading recall over sessions when a question asks for several things.

"Which cities have I been to?", "what books did I read this year?", "how many games did
we win?" are answered by turns scattered over months, one or two a conversation, while
the session lists and the neighbour sharing of `retrieval` lift whole stretches of one
session together (right for "what did the vet say?", where the answer and its context
sit side by side). So a question that asks for several things, by its grammar (a plural
after "which"/"what"/"how many", or "all", "every", "ever", "both", "kinds of"), gets its
final top k picked greedily with each further turn of an already chosen session scored a
little lower; any other question keeps its plain order. Second hops likewise read their
names from the best turn of each session, so the hop can leave the first session.
Pure ranking, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")

_PLURAL_ASKED = re.compile(
    r"\b(?:which|what|how many)\s+(?:[a-z'’-]+\s+){0,2}?([a-z]{3,}[^s'’\W]s)\b", re.IGNORECASE
)
_NOT_PLURAL = frozenset({"does", "was", "has", "is", "this", "his", "its", "yes", "always"})
_SEVERAL = re.compile(r"\b(?:all|every|ever|both|kinds|types|sorts)\b", re.IGNORECASE)


def asks_for_several(query: str) -> bool:
    """Whether a question asks for a set of things rather than one ("which cities",
    "what books", "how many times", "all the", "every", "ever", "both", "kinds of")."""
    plural = _PLURAL_ASKED.search(query)
    if plural and plural[1].lower() not in _NOT_PLURAL:
        return True
    return _SEVERAL.search(query) is not None


def spread(
    ranked: Sequence[tuple[float, T]],
    *,
    k: int,
    decay: float,
    group: Callable[[T], Hashable | None],
    pool: int,
) -> list[tuple[float, T]]:
    """The `k` best of `ranked` (score, item; best first) picked greedily from its first
    `pool`, each item's score multiplied by `decay` once for every item of its group
    already picked (an item whose group is None is never discounted). Scores returned
    are the original ones."""
    if decay >= 1.0 or k <= 1:
        return list(ranked[:k])
    left = list(ranked[: max(k, pool)])
    chosen: list[tuple[float, T]] = []
    taken: Counter[Hashable] = Counter()
    while left and len(chosen) < k:
        best, best_score = 0, float("-inf")
        for i, (score, item) in enumerate(left):
            key = group(item)
            discounted = score * decay ** taken[key] if key is not None else score
            if discounted > best_score:  # ties keep the earlier (better ranked) item
                best, best_score = i, discounted
        pick = left.pop(best)
        chosen.append(pick)
        key = group(pick[1])
        if key is not None:
            taken[key] += 1
    return chosen


def one_per_group(items: Sequence[T], group: Callable[[T], Hashable | None], n: int) -> list[T]:
    """The first `n` items of different groups, in order (None groups count as distinct)."""
    seen: set[Hashable] = set()
    out: list[T] = []
    for item in items:
        key = group(item)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        out.append(item)
        if len(out) == n:
            break
    return out
