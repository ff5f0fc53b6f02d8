"""The allowed window for anything the companion says on its own: closed while paused,
before the timezone is known, and in quiet hours (in the person's own time)."""

from __future__ import annotations

from datetime import UTC, datetime, time

from bot.notice_window import closed_reason
from memory.store.held_notices import Window

BERLIN = Window(1, "Europe/Berlin", True, False, time(22), time(8))


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 3, 2, hour, minute, tzinfo=UTC)


def test_open_in_the_day_closed_in_quiet_hours_local_time() -> None:
    assert closed_reason(BERLIN, at(10)) is None
    assert closed_reason(BERLIN, at(21, 30)) == "quiet_hours"  # 22:30 in Berlin
    assert closed_reason(BERLIN, at(6, 59)) == "quiet_hours"  # 07:59
    assert closed_reason(BERLIN, at(7)) is None  # 08:00


def test_closed_while_paused_or_before_the_timezone_is_known() -> None:
    paused = Window(1, "Europe/Berlin", True, True, time(22), time(8))
    unknown = Window(1, "UTC", False, False, time(22), time(8))
    assert closed_reason(paused, at(10)) == "paused"
    assert closed_reason(unknown, at(10)) == "timezone_unknown"


def test_no_quiet_hours_means_open_all_day() -> None:
    always = Window(1, "Europe/Berlin", True, False, None, None)
    assert closed_reason(always, at(1)) is None
