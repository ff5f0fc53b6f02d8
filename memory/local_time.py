"""Local time: a person's zone by name, and the arithmetic between their wall clock and UTC.

The one place the zone-or-UTC fallback and the local-day arithmetic are written; every
layer (the memory sub-packages, `bot`, `scheduler`) imports it. Standard library only.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo


def zone_of(name: str) -> ZoneInfo:
    """The IANA zone `name`, or UTC when it is unknown."""
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError):
        return ZoneInfo("UTC")


def local_date(instant: datetime, tz_name: str) -> date:
    """The calendar date in zone `tz_name` at `instant`."""
    return instant.astimezone(zone_of(tz_name)).date()


def at_local(day: datetime, at: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of local time `at` on `day`'s local date.

    A time skipped by a DST jump (02:30 on a spring-forward night) falls after the jump
    (03:30); a repeated one (fall back) is its first occurrence.
    """
    local_day = day.astimezone(tz).date()
    naive = datetime.combine(local_day, at)
    return naive.replace(tzinfo=tz, fold=0).astimezone(UTC)


def day_span(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """The local calendar day `day` in `tz` as a UTC interval [start, end)."""
    start = datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz).astimezone(UTC)
    return start, end
