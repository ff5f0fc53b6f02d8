"""The scheduler's pure parts: the rules before any model call, the prompt's rules,
keys, event times, merge choices, decay and diary shapes."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from pydantic import ValidationError

from memory.care.patrol_steps import DEAD_BELOW, DYING_BELOW, weight
from scheduler.claims import checkin_key, effective_time, followup_key
from scheduler.diary import day_bounds
from scheduler.merge import Side, plan_folds
from scheduler.prompts import (
    CHECKIN_RULES,
    DECIDE_TOOL,
    NO_GUILT_RULES,
    DiaryAnswer,
    clingy,
)
from scheduler.rules import GO, WAIT, Facts, Limits, checkin_verdict, followup_verdict, resume_at

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
LIMITS = Limits(recent_activity=timedelta(hours=3), max_unanswered=3)


def facts(**changes: object) -> Facts:
    values: dict[str, object] = {
        "user_id": 1,
        "timezone": "UTC",
        "paused": False,
        "reachable": True,
        "quiet_start": time(22),
        "quiet_end": time(8),
        "last_user_at": NOW - timedelta(days=1),
        "last_outreach_at": None,
        "unanswered": 0,
    }
    values.update(changes)
    return Facts(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, GO),
        ({"paused": True}, "paused"),
        ({"reachable": False}, "unreachable"),
        ({"unanswered": 3}, "unanswered"),
        ({"unanswered": 2}, GO),
        ({"quiet_start": time(9), "quiet_end": time(11)}, "quiet_hours"),
        ({"quiet_start": time(20), "quiet_end": time(10, 30)}, "quiet_hours"),  # over midnight
        ({"last_user_at": NOW - timedelta(hours=2)}, "recent_activity"),
        ({"last_user_at": None}, GO),
        ({"last_outreach_at": NOW - timedelta(hours=1)}, "recent_outreach"),
    ],
)
def test_checkin_rules(changes: dict[str, object], expected: str) -> None:
    assert checkin_verdict(facts(**changes), NOW, LIMITS) == expected


def test_followup_rules_wait_or_skip() -> None:
    event = NOW - timedelta(hours=3)
    assert followup_verdict(facts(), NOW, LIMITS, event) == GO
    assert followup_verdict(facts(last_user_at=event), NOW, LIMITS, event) == "talked_since"
    quiet = facts(quiet_start=time(9), quiet_end=time(12))
    assert followup_verdict(quiet, NOW, LIMITS, event) == WAIT
    assert resume_at(quiet, NOW, LIMITS) == datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    before = NOW - timedelta(hours=1)  # they wrote before the event, two hours ago
    recent = facts(last_user_at=NOW - timedelta(hours=2), quiet_start=None, quiet_end=None)
    assert followup_verdict(recent, NOW, LIMITS, before) == WAIT
    assert resume_at(recent, NOW, LIMITS) == NOW + timedelta(hours=1)
    assert followup_verdict(facts(paused=True), NOW, LIMITS, event) == "paused"


def test_the_checkin_prompt_states_the_no_guilt_rules() -> None:
    for rule in NO_GUILT_RULES:
        assert rule in CHECKIN_RULES
    assert DECIDE_TOOL.input_schema["required"] == ["send", "message"]


@pytest.mark.parametrize(
    "draft",
    [
        "I miss you!",
        "You haven't written in a while",
        "Are you ignoring me?",
        "Where have you been?",
        "Why didn't you reply yesterday?",
        "I've been waiting for you",
    ],
)
def test_clingy_drafts_are_caught(draft: str) -> None:
    assert clingy(draft)


def test_ordinary_drafts_pass() -> None:
    assert not clingy("Morning! How did the interview at Acme go?")
    assert not clingy("Good luck with the exam today — you've prepared well.")


def test_keys_and_event_times() -> None:
    late = datetime(2026, 3, 2, 23, 30, tzinfo=UTC)
    assert checkin_key(7, late, "Europe/Copenhagen") == "checkin:7:2026-03-03"
    assert followup_key(7, 42) == "followup:7:42"
    dated = datetime(2026, 3, 1, 23, 0, tzinfo=UTC)  # 00:00 in Copenhagen: a date only
    assert effective_time(dated, "Europe/Copenhagen") == dated + timedelta(days=1)
    timed = datetime(2026, 3, 2, 13, 0, tzinfo=UTC)
    assert effective_time(timed, "Europe/Copenhagen") == timed


def side(i: int, **changes: object) -> Side:
    values: dict[str, object] = {
        "id": i,
        "user_id": 1,
        "short_id": i,
        "pinned": False,
        "explicit": False,
        "confidence": 0.8,
        "created_at": NOW - timedelta(days=10 - i),
    }
    values.update(changes)
    return Side(**values)  # type: ignore[arg-type]


def test_merge_keeps_the_protected_then_confident_then_recent_one() -> None:
    sides = {1: side(1, confidence=0.95), 2: side(2), 3: side(3), 4: side(4, pinned=True)}
    folds = plan_folds([(1, 2, 0.95), (2, 3, 0.99), (3, 4, 0.93)], sides)
    assert [(f.keeper.id, f.loser.id) for f in folds] == [(3, 2)]  # each memory once
    assert plan_folds([(1, 2, 0.95)], sides)[0].keeper.id == 1  # more confident
    assert plan_folds([(2, 3, 0.95)], sides)[0].keeper.id == 3  # then more recent
    assert plan_folds([(3, 4, 0.95)], sides)[0].keeper.id == 4  # pinned always kept
    both = {1: side(1, explicit=True), 2: side(2, explicit=True)}
    assert plan_folds([(1, 2, 0.99)], both) == []


def test_decay_weight_and_thresholds() -> None:
    assert weight(6, 0) == 6
    assert weight(6, 30) == pytest.approx(6 / 2.718281828, rel=1e-6)
    assert DEAD_BELOW < DYING_BELOW
    assert weight(6, 33) < DYING_BELOW < weight(6, 32)


def test_the_diary_day_is_the_local_yesterday_across_dst() -> None:
    night = datetime(2026, 3, 29, 1, 5, tzinfo=UTC)  # 03:05 CEST, the night of the change
    day = day_bounds(1, "Europe/Copenhagen", night)
    assert day.day.isoformat() == "2026-03-28"
    assert (day.start, day.end) == (
        datetime(2026, 3, 27, 23, 0, tzinfo=UTC),
        datetime(2026, 3, 28, 23, 0, tzinfo=UTC),
    )


def test_diary_answers_are_validated() -> None:
    good = DiaryAnswer.model_validate(
        {"lines": ["a", " b ", "c"], "notes_to_self": ["x", "y", "z", ""]}
    )
    assert good.lines == ["a", "b", "c"] and good.notes_to_self == ["x", "y", "z"]
    with pytest.raises(ValidationError):
        DiaryAnswer.model_validate({"lines": ["only one"], "notes_to_self": ["x", "y", "z"]})
