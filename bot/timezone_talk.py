"""Noticing, in what a person writes, where they live or what time it is for them ("I live
in Berlin", "I just moved to Lisbon", "it's 3pm here", "it's almost midnight"), and the
zones that would fit. Cheap regular expressions and an offline place table: this runs
on the reply path."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.timezones import find_timezone
from bot.zone_guess import offset_for_clock, offset_of, zones_at_offset

MAX_ZONES = 4

# "I live in …" says where they are whatever the case of the name; "I'm in …" only with
# a capitalised name ("I'm in Lisbon", not "I'm in love").
_PLACE = re.compile(
    r"\b(?:(?P<strong>i\s+(?:now\s+)?live\s+in|i'?m\s+living\s+in|i\s+am\s+living\s+in"
    r"|i(?:'ve|\s+have)?\s+(?:just\s+|recently\s+)?moved\s+to|i'?m\s+based\s+in"
    r"|i\s+am\s+based\s+in)|here\s+in|i'?m\s+(?:now\s+)?in|i\s+am\s+(?:now\s+)?in)"
    r"\s+(?P<place>[^\n.!?;:()]{2,60})",
    re.IGNORECASE,
)
_CLOCK = re.compile(
    r"\bit(?:'|’)?s\s+(?:now\s+)?(?P<fuzz>almost|nearly|about|around|just\s+(?:past|after)|"
    r"already|past)?\s*(?:(?P<word>midnight|noon|midday)|(?P<h>\d{1,2})(?:[:.](?P<m>\d{2}))?"
    r"(?:\s*(?P<ampm>am|pm|a\.m\.|p\.m\.))?)"
    r"(?P<tail>\s+(?:here|over\s+here|for\s+me|where\s+i\s+am|now|already))?",
    re.IGNORECASE,
)
_STOP = re.compile(r"\s+(?:and|but|now|too|so|with|for|since|because|these|right|,)\b.*$", re.I)
_ARTICLE = re.compile(r"^(?:the\s+city\s+of\s+|the\s+)", re.I)


@dataclass(frozen=True, slots=True)
class ZoneMention:
    """Zones that fit what the person said, and a key naming the statement's meaning
    (the zone, or the UTC offset of a clock time) to avoid offering it twice."""

    zones: tuple[str, ...]
    key: str


def mentioned_place(text: str) -> ZoneMention | None:
    """'I live in Berlin' → Europe/Berlin; a place of several zones → those."""
    for match in _PLACE.finditer(text):
        phrase = _ARTICLE.sub("", _STOP.sub("", match["place"].strip()))
        words = phrase.split()
        for n in range(min(len(words), 4), 0, -1):
            candidate = " ".join(words[:n]).strip(" ,")
            if len(candidate) < 3 or not (match["strong"] or candidate[0].isupper()):
                continue
            answer = find_timezone(candidate)
            if answer.timezone is not None:
                return ZoneMention((answer.timezone,), answer.timezone)
            zones = tuple(dict.fromkeys(p.timezone for p in answer.candidates))[:MAX_ZONES]
            if zones:
                return ZoneMention(zones, "|".join(zones)[:64])
    return None


_ANSWER_LEAD = re.compile(
    r"^(?:(?:i'?m|i\s+am|we'?re|we\s+are)\s+(?:now\s+)?(?:in|from)|in|from)\s+", re.I
)
_PUNCTUATION = re.compile(r"[^\w\s,'’-]+")
MAX_ANSWER_WORDS = 4
# One-word replies that are also place names ("Nice" → Nice, France) but far more often
# just a reply; with a country ("Nice, France") they count.
_WORDS_NOT_PLACES = frozenset(
    {"nice", "reading", "mobile", "hope", "bath", "split", "sale", "male", "university"}
)


def answered_place(text: str) -> ZoneMention | None:
    """A short reply to the timezone question that names a place ("Lisbon", "in Lisbon",
    "Lisbon, Portugal", "I'm in Lisbon!") → its zone, or the zones it may be."""
    phrase = _PUNCTUATION.sub(" ", text).strip()
    phrase = _ANSWER_LEAD.sub("", phrase).strip(" ,")
    words = phrase.replace(",", " ").split()
    if not words or len(words) > MAX_ANSWER_WORDS or len(phrase) < 3:
        return None
    if len(words) == 1 and words[0].lower() in _WORDS_NOT_PLACES:
        return None
    answer = find_timezone(phrase)
    if answer.timezone is not None:
        return ZoneMention((answer.timezone,), answer.timezone)
    zones = tuple(dict.fromkeys(p.timezone for p in answer.candidates))[:MAX_ZONES]
    return ZoneMention(zones, "|".join(zones)[:64]) if zones else None


def _local_minutes(match: re.Match[str]) -> int | None:
    word = (match["word"] or "").lower()
    if word:
        return 0 if word == "midnight" else 12 * 60
    hour, minute, ampm = int(match["h"]), int(match["m"] or 0), (match["ampm"] or "").lower()
    if minute > 59:
        return None
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm.startswith("p") else 0)
    elif match["m"] is None or hour > 23:
        return None  # "it's 5" could be either 5 or 17
    return hour * 60 + minute


def mentioned_clock(text: str, now: datetime) -> ZoneMention | None:
    """'it's 3pm here' at 14:00 UTC → the zones at UTC+1 now; 'it's almost midnight' →
    those near the offset it implies. Only a clock time said to be the time now (with
    'here', 'for me', 'now', or midnight/noon) counts."""
    for match in _CLOCK.finditer(text):
        if not (match["tail"] or match["word"]):
            continue
        minutes = _local_minutes(match)
        if minutes is None:
            continue
        fuzzy = bool(match["fuzz"]) or bool(match["word"])
        if (match["fuzz"] or "").lower() in {"almost", "nearly"}:
            minutes -= 10
        offset = offset_for_clock(now, minutes % 1440, slack=30 if fuzzy else 20)
        if offset is None:
            continue
        slack = timedelta(minutes=45 if fuzzy else 0)
        zones = zones_at_offset(now, offset, slack)[:MAX_ZONES]
        if zones:
            return ZoneMention(zones, f"UTC{_signed(offset)}")
    return None


def _signed(offset: timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def zone_mention(text: str, now: datetime, current: str | None) -> ZoneMention | None:
    """What the person said about their whereabouts or clock, when it points away from
    `current` (their known zone, or None)."""
    if len(text) > 2000 or not re.search(r"\b(?:in|to|it'?s|it’s)\b", text, re.I):
        return None
    mention = mentioned_place(text) or mentioned_clock(text, now)
    if mention is None or current is None:
        return mention
    if current in mention.zones:
        return None
    if mention.key.startswith("UTC") and any(
        offset_of(current, now) == offset_of(z, now) for z in mention.zones
    ):
        return None  # their clock agrees with the zone they have
    return mention
