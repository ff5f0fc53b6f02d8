"""The rules checked in code before any model call: whether to reach out to a person now,
wait, or not at all. Pure functions of what is known about the person and the clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.timing import in_quiet_hours, next_checkin
from memory.store.facts import Facts

GO = "go"
WAIT = "wait"


@dataclass(frozen=True, slots=True)
class Limits:
    """The thresholds the rules use."""

    recent_activity: timedelta = timedelta(hours=3)
    max_unanswered: int = 3


def _always(facts: Facts, limits: Limits) -> str | None:
    """Reasons that stop any proactive message."""
    if facts.paused:
        return "paused"
    if not facts.timezone_known:
        return "timezone_unknown"
    if not facts.reachable:
        return "unreachable"
    if facts.unanswered >= limits.max_unanswered:
        return "unanswered"
    return None


def checkin_verdict(facts: Facts, now: datetime, limits: Limits) -> str:
    """GO, or why today's check-in is skipped (it is never postponed)."""
    reason = _always(facts, limits)
    if reason is not None:
        return reason
    if in_quiet_hours(now, facts.timezone, facts.quiet_start, facts.quiet_end):
        return "quiet_hours"
    if facts.last_user_at is not None and now - facts.last_user_at < limits.recent_activity:
        return "recent_activity"
    if facts.last_outreach_at is not None and now - facts.last_outreach_at < limits.recent_activity:
        return "recent_outreach"
    return GO


def followup_verdict(facts: Facts, now: datetime, limits: Limits, event_at: datetime) -> str:
    """GO, WAIT (try again later), or why the follow-up is skipped.

    If they wrote since the event, the conversation already had it in mind.
    """
    reason = _always(facts, limits)
    if reason is not None:
        return reason
    if facts.last_user_at is not None and facts.last_user_at >= event_at:
        return "talked_since"
    if in_quiet_hours(now, facts.timezone, facts.quiet_start, facts.quiet_end):
        return WAIT
    recent = [t for t in (facts.last_user_at, facts.last_outreach_at) if t is not None]
    if any(now - t < limits.recent_activity for t in recent):
        return WAIT
    return GO


def resume_at(facts: Facts, now: datetime, limits: Limits) -> datetime:
    """When a follow-up that has to wait may be tried again: the end of the quiet hours,
    or once their last activity is no longer recent."""
    if facts.quiet_end is not None and in_quiet_hours(
        now, facts.timezone, facts.quiet_start, facts.quiet_end
    ):
        end = next_checkin(now, facts.timezone, facts.quiet_end)
        if end is not None:
            return end
    recent = [t for t in (facts.last_user_at, facts.last_outreach_at) if t is not None]
    return max([now, *(t + limits.recent_activity for t in recent)])
