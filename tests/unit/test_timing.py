"""Schedules in people's own timezones, across DST and midnight."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from bot.timing import in_quiet_hours, next_checkin, parse_range, parse_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9:30", time(9, 30)),
        ("09:30", time(9, 30)),
        ("21:00", time(21, 0)),
        ("9am", time(9, 0)),
        ("12am", time(0, 0)),
        ("9:30 pm", time(21, 30)),
        ("24:00", None),
        ("9", None),
        ("13pm", None),
        ("nine", None),
        ("", None),
    ],
)
def test_parse_time(text: str, expected: time | None) -> None:
    assert parse_time(text) == expected


def test_parse_range() -> None:
    assert parse_range("22:00-08:00") == (time(22), time(8))
    assert parse_range("22:00") is None and parse_range("8:00-8:00") is None


def test_checkin_stays_at_nine_local_across_spring_forward() -> None:
    # Europe/Copenhagen jumps from 02:00 to 03:00 on 29 March 2026.
    before = next_checkin(datetime(2026, 3, 28, 9, 0, tzinfo=UTC), "Europe/Copenhagen", time(9))
    after = next_checkin(before, "Europe/Copenhagen", time(9))  # type: ignore[arg-type]
    assert before == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 CEST
    assert after == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)
    winter = next_checkin(datetime(2026, 3, 27, 9, 0, tzinfo=UTC), "Europe/Copenhagen", time(9))
    assert winter == datetime(2026, 3, 28, 8, 0, tzinfo=UTC)  # 09:00 CET


def test_nonexistent_and_repeated_local_times() -> None:
    # 02:30 does not exist in New York on 8 March 2026: it falls after the jump, once.
    gap = next_checkin(datetime(2026, 3, 8, 5, 0, tzinfo=UTC), "America/New_York", time(2, 30))
    assert gap == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)  # 03:30 EDT
    # 01:30 happens twice on 1 November 2026: the first one counts, and only once.
    first = next_checkin(datetime(2026, 11, 1, 4, 0, tzinfo=UTC), "America/New_York", time(1, 30))
    assert first == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
    following = next_checkin(first, "America/New_York", time(1, 30))  # type: ignore[arg-type]
    assert following == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)


def test_checkin_off() -> None:
    assert next_checkin(datetime(2026, 1, 1, tzinfo=UTC), "UTC", None) is None


def test_quiet_hours_across_midnight() -> None:
    def at(hour: int) -> datetime:
        return datetime(2026, 6, 1, hour, 0, tzinfo=UTC)

    assert in_quiet_hours(at(23), "UTC", time(22), time(8))
    assert in_quiet_hours(at(3), "UTC", time(22), time(8))
    assert not in_quiet_hours(at(12), "UTC", time(22), time(8))
    assert in_quiet_hours(at(13), "UTC", time(12), time(14))
    assert not in_quiet_hours(at(13), "UTC", None, None)
    assert in_quiet_hours(at(21), "Europe/Copenhagen", time(22), time(8))  # 23:00 local
