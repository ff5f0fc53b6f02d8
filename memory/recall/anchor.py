"""A time told by an event: "after the move", "before my surgery", "since the wedding".

`when.event_named` reads the relation and the event's words from the question; the
first pass of recall has usually found where the event was told (its best message
naming the event's words), and that message's time anchors a window: the `SPAN` after
it, the same span before it, or everything since it. The first pass's message candidates
inside the window then form the time list (`Candidate.window_rank`), in the order of
their fused score, as a window from a date would. Pure ranking over the candidates
already found: no statement of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from memory.recall.when import Window

C = TypeVar("C")
SPAN = timedelta(days=30)  # the default span after (or before) the event


def _stem(word: str) -> str:
    return word[:5]


def event_time(texts: Sequence[tuple[str, datetime]], words: Sequence[str]) -> datetime | None:
    """When the event was told: the time of the first of `texts` (best first) using the
    most of its `words` (by their first five letters, so "moved" finds "move")."""
    stems = {_stem(w) for w in words}
    best: tuple[int, datetime] | None = None
    for content, at in texts:
        lowered = content.lower()
        hits = sum(1 for s in stems if s in lowered)
        if hits and (best is None or hits > best[0]):
            best = (hits, at)
    return best[1] if best else None


def event_window(relation: str, at: datetime, now: datetime, span: timedelta = SPAN) -> Window:
    """The window `relation` ("before", "after", "since") opens from an event at `at`."""
    if relation == "before":
        return Window(at - span, at)
    if relation == "since":
        return Window(at, max(now, at))
    return Window(at, at + span)


def window_ranks(
    found: Sequence[C],
    window: Window,
    *,
    at: Callable[[C], datetime],
    score: Callable[[C], float],
    eligible: Callable[[C], bool],
) -> dict[int, int]:
    """Rank (1 = best, by `score`) of each eligible item of `found` inside `window`, by
    its index in `found`."""
    inside = [
        (i, c) for i, c in enumerate(found) if eligible(c) and window.start <= at(c) < window.end
    ]
    inside.sort(key=lambda pair: -score(pair[1]))
    return {i: place for place, (i, _) in enumerate(inside, start=1)}
