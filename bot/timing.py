"""Pure time arithmetic for people's schedules: parsing times, the next
check-in in a person's own timezone (DST-correct), quiet hours across midnight."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta

from memory.local_time import at_local, zone_of

_HHMM = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")


def parse_time(text: str) -> time | None:
    """'9:30', '09:30', '21:00', '9am', '9:30 pm' → time; anything else → None."""
    match = _HHMM.match(text.strip().lower())
    if match is None:
        return None
    hour, minute, meridiem = int(match[1]), int(match[2] or 0), match[3]
    if meridiem is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    elif match[2] is None:
        return None
    if hour > 23 or minute > 59:
        return None
    return time(hour, minute)


def parse_range(text: str) -> tuple[time, time] | None:
    """'22:00-08:00' → (22:00, 08:00); None when malformed or empty."""
    start, sep, end = text.replace("–", "-").partition("-")
    if not sep:
        return None
    first, second = parse_time(start), parse_time(end)
    if first is None or second is None or first == second:
        return None
    return first, second


def next_checkin(now: datetime, tz_name: str, at: time | None) -> datetime | None:
    """The next UTC instant after `now` when it is `at` in the person's timezone."""
    if at is None:
        return None
    tz = zone_of(tz_name)
    for days in range(3):
        candidate = at_local(now + timedelta(days=days), at, tz)
        if candidate > now:
            return candidate
    raise AssertionError("unreachable: a local time recurs within three days")


def in_quiet_hours(now: datetime, tz_name: str, start: time | None, end: time | None) -> bool:
    """Whether `now` falls in the person's quiet hours (which may span midnight)."""
    if start is None or end is None or start == end:
        return False
    local = now.astimezone(zone_of(tz_name)).time()
    if start < end:
        return start <= local < end
    return local >= start or local < end


SPREAD_MULTIPLIER = 2654435761  # Knuth's multiplicative hash: ids spread evenly


def spread_checkin(
    at: time, user_id: int, window: timedelta, quiet_start: time | None, quiet_end: time | None
) -> time:
    """The person's check-in time `at` moved later by their own stable offset inside
    `window`, so a popular time is not one minute for everyone. The offset never carries
    it past local midnight nor across a quiet-hours boundary (it stops just before)."""
    span = int(window.total_seconds())
    if span <= 0:
        return at
    base = at.hour * 3600 + at.minute * 60 + at.second
    offset = (user_id * SPREAD_MULTIPLIER) % 2**32 * span // 2**32
    latest = min(base + offset, 24 * 3600 - 1)
    for boundary in (quiet_start, quiet_end):
        if boundary is None or quiet_start == quiet_end:
            continue
        seconds = boundary.hour * 3600 + boundary.minute * 60 + boundary.second
        if base < seconds <= latest:
            latest = seconds - 1
    return time(latest // 3600, latest % 3600 // 60, latest % 60)
