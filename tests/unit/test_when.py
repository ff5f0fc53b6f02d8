"""Time in questions: relative and calendar expressions resolved against now."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from memory.recall.when import event_named, time_window

NOW = datetime(2023, 8, 20, 15, 0, tzinfo=UTC)  # a Sunday in summer


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did I do yesterday?", date(2023, 8, 19), date(2023, 8, 20)),
        ("where did we go last summer", date(2022, 6, 1), date(2022, 9, 1)),
        ("anything fun this summer?", date(2023, 6, 1), date(2023, 9, 1)),
        ("what did I read last winter", date(2022, 12, 1), date(2023, 3, 1)),
        ("what happened in May?", date(2023, 5, 1), date(2023, 6, 1)),
        ("and last August?", date(2022, 8, 1), date(2022, 9, 1)),
        ("what did I cook on 8 May", date(2023, 5, 8), date(2023, 5, 9)),
        ("on the 12th of December", date(2022, 12, 12), date(2022, 12, 13)),
        ("May 3rd, 2022", date(2022, 5, 3), date(2022, 5, 4)),
        ("what was I doing in June 2021", date(2021, 6, 1), date(2021, 7, 1)),
        ("the concert in 2022", date(2022, 1, 1), date(2023, 1, 1)),
        ("two weeks ago", date(2023, 8, 3), date(2023, 8, 9)),
        ("last week at work", date(2023, 8, 7), date(2023, 8, 14)),
        ("last weekend", date(2023, 8, 12), date(2023, 8, 14)),
        ("on Tuesday", date(2023, 8, 15), date(2023, 8, 16)),
        ("this month", date(2023, 8, 1), date(2023, 9, 1)),
        ("last year", date(2022, 1, 1), date(2023, 1, 1)),
        # a date can anchor the span instead of now
        ("what did we do the week before August 3, 2023?", date(2023, 7, 27), date(2023, 8, 3)),
        ("the puppy I got two weeks before 11 August", date(2023, 7, 25), date(2023, 7, 31)),
        ("last weekend before April 10, 2023", date(2023, 4, 8), date(2023, 4, 10)),
        ("the Sunday before October 25, 2022", date(2022, 10, 23), date(2022, 10, 24)),
        ("the Tuesday before 8 August", date(2023, 8, 1), date(2023, 8, 2)),
        ("the weekend after 8 May", date(2023, 5, 13), date(2023, 5, 15)),
        ("the day after May 8", date(2023, 5, 9), date(2023, 5, 10)),
        ("a month after June 2022", date(2022, 7, 16), date(2022, 8, 15)),
        ("what was I up to before May?", date(2023, 4, 1), date(2023, 5, 1)),
        ("and after the 12th of June", date(2023, 6, 13), date(2023, 7, 13)),
        ("everything since June", date(2023, 6, 1), date(2023, 8, 20)),
        ("since 2021", date(2021, 1, 1), date(2023, 8, 20)),
    ],
)
def test_time_expressions_become_windows(query: str, start: date, end: date) -> None:
    window = time_window(query, NOW)
    assert window is not None
    assert (window.start.date(), window.end.date()) == (start, end)
    assert window.start.tzinfo is UTC


@pytest.mark.parametrize(
    "query",
    ["what is my dog called?", "this may hurt a little", "the 2 of us", "31 June", "I'm 42"],
)
def test_no_time_no_window(query: str) -> None:
    assert time_window(query, NOW) is None


@pytest.mark.parametrize(
    "query", ["what did I do after the party?", "before we met", "since the move", "after 5"]
)
def test_before_or_after_something_that_is_not_a_date_names_no_time(query: str) -> None:
    assert time_window(query, NOW) is None


@pytest.mark.parametrize(
    ("query", "relation", "words"),
    [
        ("what did I do after the move?", "after", ("move",)),
        ("how was I sleeping before my surgery", "before", ("surgery",)),
        ("how has my back been since the wedding", "since", ("wedding",)),
        ("what did we do after the road trip to relax", "after", ("road", "trip")),
    ],
)
def test_an_event_can_tell_the_time(query: str, relation: str, words: tuple[str, ...]) -> None:
    assert event_named(query) == (relation, words)


@pytest.mark.parametrize(
    "query", ["the week before 3 August", "since June", "after 2021", "after that", "what now"]
)
def test_a_date_or_nothing_after_before_is_no_event(query: str) -> None:
    assert event_named(query) is None
