"""Each person's check-in moves by a stable offset inside the spread window, never past
midnight nor across quiet hours."""

from __future__ import annotations

from datetime import time, timedelta

from bot.timing import spread_checkin

WINDOW = timedelta(minutes=20)


def seconds(at: time) -> int:
    return at.hour * 3600 + at.minute * 60 + at.second


def test_offsets_are_stable_within_the_window_and_spread_a_popular_time() -> None:
    times = [spread_checkin(time(9), person, WINDOW, None, None) for person in range(1, 2001)]
    assert times == [spread_checkin(time(9), p, WINDOW, None, None) for p in range(1, 2001)]
    assert all(time(9) <= t < time(9, 20) for t in times)
    per_minute = [sum(1 for t in times if t.minute == m) for m in range(20)]
    assert min(per_minute) > 2000 / 20 / 2  # no minute is empty or carries the crowd
    assert max(per_minute) < 2000 / 20 * 2


def test_no_window_keeps_the_time() -> None:
    assert spread_checkin(time(9), 7, timedelta(0), None, None) == time(9)


def test_the_offset_stops_before_quiet_hours_begin() -> None:
    moved = [spread_checkin(time(21, 50), p, WINDOW, time(22), time(7)) for p in range(1, 500)]
    assert all(time(21, 50) <= t < time(22) for t in moved)
    assert max(moved) == time(21, 59, 59)


def test_a_time_inside_quiet_hours_is_not_carried_out_of_them() -> None:
    moved = [spread_checkin(time(6, 50), p, WINDOW, time(22), time(7)) for p in range(1, 500)]
    assert all(time(6, 50) <= t < time(7) for t in moved)


def test_the_offset_never_crosses_midnight() -> None:
    moved = [spread_checkin(time(23, 55), p, WINDOW, None, None) for p in range(1, 500)]
    assert all(time(23, 55) <= t <= time(23, 59, 59) for t in moved)
    assert seconds(max(moved)) == 24 * 3600 - 1
