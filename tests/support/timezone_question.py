"""The timezone question a first reply carries (first contact asks for the timezone), so
tests about something else can read the answer itself."""

from __future__ import annotations

from bot.timezone_onboarding import QUESTION


def answer_part(text: str) -> str:
    """The reply without the timezone question appended to it; asserts it was there."""
    answer, sep, _ = text.rpartition(f"\n\n{QUESTION}")
    assert sep, f"no timezone question in {text[-200:]!r}"
    return answer


def plain(text: str) -> str:
    """The reply without the timezone question, if it carries one (first contact)."""
    return text.split(f"\n\n{QUESTION}", 1)[0]
