"""Tier and expiry of a memory, decided in code; event dates read in the person's timezone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from memory.store.items import CORE_CATEGORIES

EVENT_GRACE = timedelta(days=3)  # an event stays in mind a few days after it happened
SILENCE: dict[str, timedelta] = {
    "emotion": timedelta(days=3),
    "thread": timedelta(days=21),
    "goal": timedelta(days=60),
}
HINTS: dict[str, timedelta] = {"days": timedelta(days=3), "weeks": timedelta(days=21)}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2})?$")


@dataclass(frozen=True, slots=True)
class Lifespan:
    """Where a memory lives and for how long."""

    category: str
    tier: str
    event_at: datetime | None
    expires_at: datetime | None


def is_event_date(value: str) -> bool:
    """Whether `value` is a real `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM`."""
    if not _DATE.match(value):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def parse_event_date(value: str, zone: ZoneInfo) -> datetime:
    """A local `YYYY-MM-DD[THH:MM]` in `zone` as an aware UTC datetime (midnight if no time)."""
    if not is_event_date(value):
        raise ValueError(f"not an event date: {value!r}")
    return datetime.fromisoformat(value).replace(tzinfo=zone).astimezone(UTC)


def lifespan(
    category: str, *, event_at: datetime | None, now: datetime, hint: str | None = None
) -> Lifespan:
    """Tier from the category; expiry: events a few days after their date, threads,
    goals and emotions after a stretch of silence, core never. An undated event is a thread."""
    if category in CORE_CATEGORIES:
        return Lifespan(category, "core", None, None)
    if category == "event" and event_at is None:
        category = "thread"
    if category == "event" and event_at is not None:
        return Lifespan(category, "active", event_at, event_at + EVENT_GRACE)
    expires_at = now + HINTS.get(hint or "", SILENCE.get(category, SILENCE["thread"]))
    if event_at is not None:
        expires_at = max(expires_at, event_at + EVENT_GRACE)
    return Lifespan(category, "active", event_at, expires_at)
