"""What a person says about where they live or what time it is, read into zones; and the
zones offered first from a platform's language tag or the machine's zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.timezone_talk import answered_place, zone_mention
from bot.zone_guess import likely_zones, offset_for_clock

WINTER_2PM = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
SUMMER_2PM = datetime(2026, 7, 2, 14, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "zones"),
    [
        ("I live in Berlin", ("Europe/Berlin",)),
        ("i just moved to lisbon!", ("Europe/Lisbon",)),
        ("I've moved to Tokyo, finally", ("Asia/Tokyo",)),
        ("I'm based in São Paulo these days", ("America/Sao_Paulo",)),
        ("I'm in New York now", ("America/New_York",)),
        ("I live in Portland", ("America/New_York", "America/Los_Angeles")),
    ],
)
def test_a_place_they_live_names_its_zone(text: str, zones: tuple[str, ...]) -> None:
    mention = zone_mention(text, WINTER_2PM, None)
    assert mention is not None and mention.zones == zones


@pytest.mark.parametrize(
    "text",
    ["I'm in love", "i'm in a meeting", "we met in Paris", "I live in a flat", "it's 3 here"],
)
def test_other_sentences_name_no_zone(text: str) -> None:
    assert zone_mention(text, WINTER_2PM, None) is None


def test_a_clock_time_gives_the_zones_at_that_offset_now() -> None:
    winter = zone_mention("it's 3pm here", WINTER_2PM, None)
    assert winter is not None and winter.key == "UTC+01:00"
    assert {"Europe/Paris", "Europe/Berlin"} <= set(winter.zones)
    summer = zone_mention("it's 3pm here", SUMMER_2PM, None)  # Paris is +2 in July
    assert summer is not None and summer.key == "UTC+01:00" and "Europe/London" in summer.zones
    assert "Europe/Paris" not in summer.zones
    evening = zone_mention("It’s 9am for me", WINTER_2PM, None)
    assert evening is not None and evening.zones == ("America/New_York",)


def test_nothing_is_offered_that_matches_the_known_zone() -> None:
    assert zone_mention("it's 3pm here", WINTER_2PM, "Europe/Rome") is None  # same offset
    assert zone_mention("I live in Berlin", WINTER_2PM, "Europe/Berlin") is None
    moved = zone_mention("I live in Berlin", WINTER_2PM, "Europe/London")
    assert moved is not None and moved.zones == ("Europe/Berlin",)


def test_a_clock_offset_is_rounded_to_a_quarter_hour_within_reach() -> None:
    assert offset_for_clock(WINTER_2PM.replace(minute=52), 15 * 60) == timedelta(0)
    assert offset_for_clock(WINTER_2PM, 19 * 60 + 30) == timedelta(hours=5, minutes=30)
    assert offset_for_clock(WINTER_2PM, 2 * 60) == timedelta(hours=12)
    assert offset_for_clock(WINTER_2PM, 14 * 60 + 7, slack=5) is None


def test_likely_zones_from_language_region_or_the_machine() -> None:
    assert likely_zones("en-US")[:2] == ("America/New_York", "America/Chicago")
    assert likely_zones("pt-br")[0] == "America/Sao_Paulo"
    assert likely_zones("de")[0] == "Europe/Berlin"
    assert likely_zones(None, "Europe/Oslo")[0] == "Europe/Oslo"
    assert likely_zones("xx") == (
        "Europe/London",
        "Europe/Berlin",
        "America/New_York",
        "America/Los_Angeles",
    )


@pytest.mark.parametrize(
    ("text", "zones"),
    [
        ("Lisbon", ("Europe/Lisbon",)),
        ("in Lisbon.", ("Europe/Lisbon",)),
        ("Lisbon, Portugal", ("Europe/Lisbon",)),
        ("I'm in Tokyo!", ("Asia/Tokyo",)),
        ("from tokyo", ("Asia/Tokyo",)),
        ("Nice, France", ("Europe/Paris",)),
        ("Portland", ("America/New_York", "America/Los_Angeles")),
    ],
)
def test_a_short_reply_naming_a_place_answers_the_question(
    text: str, zones: tuple[str, ...]
) -> None:
    mention = answered_place(text)
    assert mention is not None and mention.zones == zones


@pytest.mark.parametrize(
    "text",
    ["ok", "thanks!", "nice", "hello there", "I went to Lisbon and Porto last summer", ""],
)
def test_a_reply_that_is_not_a_place_answers_nothing(text: str) -> None:
    assert answered_place(text) is None
