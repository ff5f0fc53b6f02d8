"""A time told by an event: anchoring a window on the message that told of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.recall.anchor import event_time, event_window, window_ranks
from memory.recall.when import Window

DAY = timedelta(days=1)
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def test_the_event_is_when_the_best_message_using_most_of_its_words_was_said() -> None:
    told = [
        ("Packing for the trip tomorrow", T0),
        ("We are back from our road trip, what a drive", T0 + 3 * DAY),
        ("Road works everywhere", T0 + 5 * DAY),
    ]
    assert event_time(told, ("road", "trip")) == T0 + 3 * DAY
    assert event_time(told, ("moved",)) is None
    assert event_time([("we finally moved in", T0)], ("move",)) == T0  # by stem


def test_the_window_opens_after_before_or_since_the_event() -> None:
    now = T0 + 400 * DAY
    assert event_window("after", T0, now, 30 * DAY) == Window(T0, T0 + 30 * DAY)
    assert event_window("before", T0, now, 30 * DAY) == Window(T0 - 30 * DAY, T0)
    assert event_window("since", T0, now) == Window(T0, now)


def test_rows_inside_the_window_are_ranked_by_score() -> None:
    rows = [("a", T0 - DAY, 9.0), ("b", T0 + DAY, 1.0), ("c", T0 + 2 * DAY, 5.0), ("d", T0, 2.0)]
    ranks = window_ranks(
        rows,
        Window(T0, T0 + 10 * DAY),
        at=lambda r: r[1],
        score=lambda r: r[2],
        eligible=lambda r: r[0] != "d",
    )
    assert ranks == {2: 1, 1: 2}  # by index in rows: c first, then b; a is before, d ineligible
