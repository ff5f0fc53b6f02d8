"""When a question asks about: dates and relative time in a query, resolved against now.

"yesterday", "last week", "three months ago", "last summer", "in May", "on 8 May",
"May 2023", "in 2022" become a `Window` of datetimes (in `now`'s timezone); recall then
favours what was said inside it. A date can anchor the phrase instead of now: "the week
before 3 August", "two weeks after May 8", "the Sunday before 25 October", "since June".
Pure arithmetic on the query text, no I/O. Seasons are the northern meteorological ones
(summer = June to August). A window reaches a few days past its end, because people
tell of a day after it ("yesterday we went ...").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month
UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
NUMBERS = {"a": 1, "one": 1, "a couple of": 2, "two": 2, "three": 3, "a few": 3, "four": 4}
NUMBERS |= {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
SLACK = timedelta(days=3)  # recall looks this far past a window's end

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_COUNT = "|".join(sorted(NUMBERS, key=len, reverse=True)) + r"|\d{1,2}"
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH})\b\.?(?:,? (\d{{4}}))?")
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?\b(?:,? (\d{{4}}))?")
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,? (?:of )?(\d{{4}})\b")
_IN_MONTH = re.compile(rf"\b(?:in|during|since|last) ({_MONTH})\b")
_YEAR = re.compile(r"\b(?:in|during|of|since) ((?:19|20)\d\d)\b")
_AGO = re.compile(rf"\b({_COUNT}) (day|week|month|year)s? ago\b")
_RELATIVE = re.compile(r"\b(last|this|past|previous) (week|weekend|month|year)\b")
_SEASON = re.compile(
    r"\b(last|this|in the|during the|over the) (spring|summer|autumn|fall|winter)\b"
)
_WEEKDAY = re.compile(rf"\b(?:on|last) ({'|'.join(WEEKDAYS)})\b")
_UNIT = rf"day|week|weekend|month|year|{'|'.join(WEEKDAYS)}"
_ANCHORED = re.compile(r"\b(before|after|since) ")
_SPAN = re.compile(rf"(?:\b({_COUNT}) )?\b({_UNIT})s? $")
_DAYS = {"today": 0, "tonight": 0, "this morning": 0, "yesterday": 1, "last night": 1}
_DAY = re.compile(r"\b(today|tonight|this morning|yesterday|last night)\b")


@dataclass(frozen=True, slots=True)
class Window:
    """A stretch of time a question asks about: `start` inclusive, `end` exclusive."""

    start: datetime
    end: datetime


def _midnight(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int, like: datetime) -> datetime:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return _midnight(like).replace(year=year, month=month, day=1)


def _months(start: datetime, count: int) -> Window:
    return Window(start, _month_start(start.year, start.month + count, start))


def _latest_month(month: int, now: datetime, *, before_this: bool = False) -> Window:
    """The month named: this year's if it has begun (and `before_this` allows), else last."""
    year = (
        now.year if month < now.month or (month == now.month and not before_this) else now.year - 1
    )
    return _months(_month_start(year, month, now), 1)


def _day(day: int, month: int, year: int | None, now: datetime) -> Window | None:
    try:
        moment = _midnight(now).replace(year=year or now.year, month=month, day=day)
        if year is None and moment > now:
            moment = moment.replace(year=now.year - 1)
    except ValueError:  # 31 June, 29 February of a plain year
        return None
    return Window(moment, moment + timedelta(days=1))


def _season(which: str, name: str, now: datetime) -> Window:
    """The latest season of that name to have begun; for "last", the one before it when
    that one is still going on."""
    start = _month_start(now.year, SEASONS[name], now)
    if start > now:
        start = _month_start(now.year - 1, SEASONS[name], now)
    season = _months(start, 3)
    if which == "last" and now < season.end:
        season = _months(_month_start(start.year - 1, start.month, now), 3)
    return season


def _relative(which: str, unit: str, now: datetime) -> Window:
    today = _midnight(now)
    if unit in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday())
        start = monday - timedelta(days=7) if which != "this" else monday
        if unit == "weekend":
            return Window(start + timedelta(days=5), start + timedelta(days=7))
        return Window(start, start + timedelta(days=7))
    if unit == "month":
        return _months(_month_start(now.year, now.month - (which != "this"), now), 1)
    year = now.year - (which != "this")
    return Window(_month_start(year, 1, now), _month_start(year + 1, 1, now))


def _weekday(name: str, now: datetime) -> Window:
    today = _midnight(now)
    back = (today.weekday() - WEEKDAYS.index(name)) % 7 or 7
    start = today - timedelta(days=back)
    return Window(start, start + timedelta(days=1))


def _ago(count: str, unit: str, now: datetime) -> Window:
    days = UNITS[unit] * (NUMBERS.get(count) or int(count))
    centre = _midnight(now) - timedelta(days=days)
    half = timedelta(days=max(1, UNITS[unit] // 2))
    return Window(centre - half, centre + half)


def _calendar(text: str, now: datetime, *, at_start: bool) -> Window | None:
    """The calendar date or month `text` names ("8 May", "May 8, 2023", "June 2021"):
    anywhere, or (`at_start`) only where it starts."""
    for pattern in (_DAY_MONTH, _MONTH_DAY, _MONTH_YEAR):
        m = pattern.match(text) if at_start else pattern.search(text)
        if m is None:
            continue
        if pattern is _MONTH_YEAR:
            return _months(_month_start(int(m[2]), MONTHS[m[1]], now), 1)
        day, month = (m[1], m[2]) if pattern is _DAY_MONTH else (m[2], m[1])
        return _day(int(day), MONTHS[month], int(m[3]) if m[3] else None, now)
    return None


def _date_at(text: str, now: datetime) -> Window | None:
    """The calendar date, month or year `text` starts with ("8 May", "May 8, 2023",
    "June 2021", "June", "2022"), or None."""
    text = text.removeprefix("the ")
    if found := _calendar(text, now, at_start=True):
        return found
    if m := re.match(rf"({_MONTH})\b", text):
        return _latest_month(MONTHS[m[1]], now)
    if m := re.match(r"((?:19|20)\d\d)\b", text):
        return Window(_month_start(int(m[1]), 1, now), _month_start(int(m[1]) + 1, 1, now))
    return None


def _anchored(text: str, now: datetime) -> Window | None:
    """A span before or after a date the query names, or the time since it: "the week
    before 3 August" (the 7 days before it), "two weeks after May 8" (around the 22nd),
    "the Sunday before ...", "the weekend after ...", "before June" (the 30 days before),
    "since 2021" (from then until now)."""
    for m in _ANCHORED.finditer(text):
        anchor = _date_at(text[m.end() :], now)
        if anchor is None:
            continue
        if m[1] == "since":
            return Window(anchor.start, max(now, anchor.end))
        before = m[1] == "before"
        edge = anchor.start if before else anchor.end
        span = _SPAN.search(text[: m.end() - len(m[1]) - 1])
        if span is None:
            return (
                Window(edge - timedelta(days=30), edge)
                if before
                else Window(edge, edge + timedelta(days=30))
            )
        count, unit = span[1], span[2]
        if unit in WEEKDAYS or unit == "weekend":
            first = WEEKDAYS.index(unit) if unit in WEEKDAYS else 5
            length = timedelta(days=1 if unit in WEEKDAYS else 2)
            if before:
                back = (edge.weekday() - first - 1) % 7 + 1
                start = _midnight(edge) - timedelta(days=back)
            else:
                start = _midnight(edge) + timedelta(days=(first - edge.weekday()) % 7)
            return Window(start, start + length)
        days = timedelta(days=UNITS[unit])
        if count is not None:
            centre = edge + (-1 if before else 1) * days * (NUMBERS.get(count) or int(count))
            half = timedelta(days=max(1, UNITS[unit] // 2))
            return Window(centre - half, centre + half)
        return Window(edge - days, edge) if before else Window(edge, edge + days)
    return None


def time_window(query: str, now: datetime) -> Window | None:
    """The time `query` asks about, resolved against `now`; None when it names none."""
    text = " ".join(query.lower().split())
    if found := _anchored(text, now) or _calendar(text, now, at_start=False):
        return found
    if m := _DAY.search(text):
        start = _midnight(now) - timedelta(days=_DAYS[m[1]])
        return Window(start, start + timedelta(days=1))
    if m := _AGO.search(text):
        return _ago(m[1], m[2], now)
    if m := _SEASON.search(text):
        return _season(m[1], m[2], now)
    if m := _RELATIVE.search(text):
        return _relative(m[1], m[2], now)
    if m := _WEEKDAY.search(text):
        return _weekday(m[1], now)
    if m := _IN_MONTH.search(text):
        return _latest_month(MONTHS[m[1]], now, before_this=m[0].startswith("last"))
    if m := _YEAR.search(text):
        year = int(m[1])
        return Window(_month_start(year, 1, now), _month_start(year + 1, 1, now))
    return None


_EVENT = re.compile(
    r"\b(before|after|since) (?:the |my |our |his |her |their |a |an |we |i )?"
    r"([a-z][a-z'-]*(?: [a-z][a-z'-]*){0,3})"
)
_ANY_TIME = datetime(2000, 1, 1, tzinfo=UTC)  # only to tell a date from an event
_EVENT_ENDS = frozenset({
    "to", "and", "or", "but", "with", "when", "while", "did", "do", "does", "was", "were",
    "is", "are", "had", "has", "have", "that", "which", "who", "what", "how", "for", "from",
    "at", "in", "on", "of", "so", "then", "it", "we", "i", "you", "he", "she", "they",
})  # fmt: skip


def event_named(query: str) -> tuple[str, tuple[str, ...]] | None:
    """A time told by an event rather than a date: "after the move", "before my
    surgery", "since the wedding" give the relation and the event's words (None when
    the query names a date instead, or no event)."""
    text = " ".join(query.lower().split())
    for m in _EVENT.finditer(text):
        words: list[str] = []
        for word in m[2].split():
            if word in _EVENT_ENDS:
                break
            words.append(word)
        if words and _date_at(m[2], _ANY_TIME) is None:
            return m[1], tuple(w for w in words if len(w) >= 3) or tuple(words)
    return None
