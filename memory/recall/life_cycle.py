"""Where a memory stands in its life cycle, as the prompt shows it: in the standing
block, or recall-only and, when recall brings it back, marked with its dates.

The standing (always-loaded) block holds what is fresh, pinned, explicit or affirmed:
a pinned memory always; otherwise a sure (not `unsure`) memory whose status is `active`
— never faded to `dying` by the patrol, or affirmed since — and, in the active tier,
not expired, with an event only while it is near today (context.py's window). Explicit
memories (the person's own words) never decay, and affirmation makes a memory `active`
again (`memory.learning.affirmation`), so both stay in it. Everything else that is live
is recall-only: `dying` memories, expired active ones, past events and unsure ones;
when recall finds one, its line says that it is over, or unsure, with its dates
("over: said 3 weeks ago, ended 20 Nov"), never as if it were current. Dead memories are
in neither: only an explicit search finds them, until the patrol deletes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy import ColumnElement, and_, or_

from memory.store.tables import Memory


@dataclass(frozen=True, slots=True)
class Life:
    """The columns of a memory that say where it is in its life cycle."""

    tier: str
    status: str
    confidence: float
    unsure: bool
    created_at: datetime
    event_at: datetime | None = None
    expires_at: datetime | None = None
    last_confirmed_at: datetime | None = None


def standing_filter() -> ColumnElement[bool]:
    """The SQL side of the rule: pinned, or sure and `active` (live is checked apart;
    the active tier's expiry and event window are context.py's `near`)."""
    return or_(Memory.pinned, and_(Memory.status == "active", ~Memory.unsure))


def said_at(life: Life) -> datetime:
    """When the person last said or confirmed it (its version's creation otherwise)."""
    return max(d for d in (life.created_at, life.last_confirmed_at) if d is not None)


def ago(when: datetime, now: datetime) -> str:
    """'today', 'yesterday', '5 days ago', '3 weeks ago', '4 months ago'."""
    days = (now - when).days
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days < 14:
        return f"{days} days ago"
    if days < 61:
        return f"{days // 7} weeks ago"
    return f"{days // 30} months ago"


def over_note(life: Life, now: datetime, zone: ZoneInfo) -> str | None:
    """How a recalled memory that is not current is marked (None when it is current)."""
    said = f"said {ago(said_at(life), now)}"
    if life.unsure:
        return f"unconfirmed, {round(life.confidence * 100)}% sure, {said}"
    if life.tier == "active" and life.event_at is not None and life.event_at < now:
        return f"over: {said}, it was on {life.event_at.astimezone(zone):%-d %b}"
    if life.tier == "active" and life.expires_at is not None and life.expires_at <= now:
        return f"over: {said}, ended {life.expires_at.astimezone(zone):%-d %b}"
    if life.status == "dying":
        return f"may be out of date: {said}, not confirmed since"
    return None
