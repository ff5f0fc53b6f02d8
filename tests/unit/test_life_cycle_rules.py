"""The life cycle's pure rules: what affirming does to a memory, and how recall marks
what is over, faded or unsure."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from memory.learning.affirmation import affirmed
from memory.recall.life_cycle import Life, ago, over_note
from memory.store.items import MemoryItem

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
ZONE = ZoneInfo("Europe/Copenhagen")


def item(**fields: object) -> MemoryItem:
    base: dict[str, object] = {
        "id": 1,
        "short_id": 1,
        "user_id": 1,
        "tier": "core",
        "category": "fact",
        "content": "The person works at the bakery",
        "importance": 6.0,
        "confidence": 0.75,
        "source": "extracted",
        "pinned": False,
        "status": "dying",
        "event_at": None,
        "expires_at": None,
        "valid_from": NOW - timedelta(days=40),
        "valid_until": None,
        "created_at": NOW - timedelta(days=40),
    }
    return MemoryItem(**(base | fields))  # type: ignore[arg-type]


def test_affirming_raises_confidence_counts_the_mention_and_revives() -> None:
    after = affirmed(item(), NOW)
    assert (after.confidence, after.mention_count, after.status) == (0.9, 2, "active")
    assert after.last_confirmed_at == NOW and after.expires_at is None
    assert affirmed(item(confidence=0.95), NOW).confidence == 1.0


def test_affirming_an_active_memory_restarts_its_expiry_from_now_never_earlier() -> None:
    thread = item(tier="active", category="thread", expires_at=NOW - timedelta(days=2))
    assert affirmed(thread, NOW).expires_at == NOW + timedelta(days=21)
    emotion = replace(thread, category="emotion")
    assert affirmed(emotion, NOW).expires_at == NOW + timedelta(days=3)
    long_goal = replace(thread, category="goal", expires_at=NOW + timedelta(days=90))
    assert affirmed(long_goal, NOW).expires_at == NOW + timedelta(days=90)
    hinted = affirmed(emotion, NOW, expires_at=NOW + timedelta(days=21))
    assert hinted.expires_at == NOW + timedelta(days=21)


def test_affirming_an_event_keeps_its_date() -> None:
    when = NOW + timedelta(days=5)
    event = item(
        tier="active", category="event", event_at=when, expires_at=when + timedelta(days=3)
    )
    assert affirmed(event, NOW).expires_at == when + timedelta(days=3)


def life(**fields: object) -> Life:
    base: dict[str, object] = {
        "tier": "active",
        "status": "active",
        "confidence": 0.9,
        "unsure": False,
        "created_at": NOW - timedelta(days=21),
    }
    return Life(**(base | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "note"),
    [
        ({}, None),
        ({"expires_at": NOW + timedelta(days=1)}, None),
        ({"expires_at": NOW - timedelta(days=6)}, "over: said 3 weeks ago, ended 20 Nov"),
        (
            {"event_at": datetime(2026, 11, 19, 23, 30, tzinfo=UTC)},
            "over: said 3 weeks ago, it was on 20 Nov",  # already the 20th in Copenhagen
        ),
        (
            {"tier": "core", "status": "dying"},
            "may be out of date: said 3 weeks ago, not confirmed since",
        ),
        ({"unsure": True, "confidence": 0.6}, "unconfirmed, 60% sure, said 3 weeks ago"),
        (
            {"status": "dying", "last_confirmed_at": NOW - timedelta(days=1)},
            "may be out of date: said yesterday, not confirmed since",
        ),
    ],
)
def test_recall_marks_what_is_over_with_its_dates(fields: dict[str, object], note: str) -> None:
    assert over_note(life(**fields), NOW, ZONE) == note


def test_ages_read_like_speech() -> None:
    said = [NOW - timedelta(days=d, hours=1) for d in (0, 1, 5, 20, 100)]
    assert [ago(s, NOW) for s in said] == [
        "today",
        "yesterday",
        "5 days ago",
        "2 weeks ago",
        "3 months ago",
    ]
