"""Likely timezones from what a platform tells about a person (a language tag such as
Telegram's `language_code` or Discord's locale, or the terminal's own zone), and the
zones that keep a given local clock time right now. A small table, no network."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

GENERIC = ("Europe/London", "Europe/Berlin", "America/New_York", "America/Los_Angeles")
"""Offered when nothing hints at the person's whereabouts."""

BY_REGION: dict[str, tuple[str, ...]] = {
    "us": ("America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles"),
    "ca": ("America/Toronto", "America/Vancouver", "America/Edmonton", "America/Halifax"),
    "gb": ("Europe/London",),
    "ie": ("Europe/Dublin",),
    "au": ("Australia/Sydney", "Australia/Melbourne", "Australia/Brisbane", "Australia/Perth"),
    "nz": ("Pacific/Auckland",),
    "in": ("Asia/Kolkata",),
    "br": ("America/Sao_Paulo", "America/Manaus"),
    "pt": ("Europe/Lisbon",),
    "mx": ("America/Mexico_City", "America/Tijuana"),
    "es": ("Europe/Madrid",),
    "ar": ("America/Argentina/Buenos_Aires",),
    "de": ("Europe/Berlin",),
    "at": ("Europe/Vienna",),
    "ch": ("Europe/Zurich",),
    "fr": ("Europe/Paris",),
    "be": ("Europe/Brussels",),
    "nl": ("Europe/Amsterdam",),
    "it": ("Europe/Rome",),
    "dk": ("Europe/Copenhagen",),
    "se": ("Europe/Stockholm",),
    "no": ("Europe/Oslo",),
    "fi": ("Europe/Helsinki",),
    "pl": ("Europe/Warsaw",),
    "cz": ("Europe/Prague",),
    "gr": ("Europe/Athens",),
    "tr": ("Europe/Istanbul",),
    "ru": ("Europe/Moscow", "Asia/Yekaterinburg", "Asia/Novosibirsk"),
    "ua": ("Europe/Kyiv",),
    "jp": ("Asia/Tokyo",),
    "kr": ("Asia/Seoul",),
    "cn": ("Asia/Shanghai",),
    "tw": ("Asia/Taipei",),
    "hk": ("Asia/Hong_Kong",),
    "id": ("Asia/Jakarta",),
    "vn": ("Asia/Ho_Chi_Minh",),
    "th": ("Asia/Bangkok",),
    "il": ("Asia/Jerusalem",),
    "sa": ("Asia/Riyadh",),
    "ae": ("Asia/Dubai",),
    "eg": ("Africa/Cairo",),
    "za": ("Africa/Johannesburg",),
    "ng": ("Africa/Lagos",),
}

# A language alone: where most of its speakers keep time (its main region first).
BY_LANGUAGE: dict[str, tuple[str, ...]] = {
    "en": ("Europe/London", "America/New_York", "America/Los_Angeles", "Asia/Kolkata"),
    "de": ("Europe/Berlin", "Europe/Vienna", "Europe/Zurich"),
    "fr": ("Europe/Paris", "Europe/Brussels", "America/Toronto"),
    "es": ("Europe/Madrid", "America/Mexico_City", "America/Bogota"),
    "pt": ("America/Sao_Paulo", "Europe/Lisbon"),
    "it": ("Europe/Rome",),
    "nl": ("Europe/Amsterdam", "Europe/Brussels"),
    "da": ("Europe/Copenhagen",),
    "sv": ("Europe/Stockholm",),
    "nb": ("Europe/Oslo",),
    "no": ("Europe/Oslo",),
    "fi": ("Europe/Helsinki",),
    "pl": ("Europe/Warsaw",),
    "cs": ("Europe/Prague",),
    "el": ("Europe/Athens",),
    "tr": ("Europe/Istanbul",),
    "ru": ("Europe/Moscow", "Asia/Yekaterinburg", "Asia/Novosibirsk"),
    "uk": ("Europe/Kyiv",),
    "ja": ("Asia/Tokyo",),
    "ko": ("Asia/Seoul",),
    "zh": ("Asia/Shanghai", "Asia/Taipei"),
    "hi": ("Asia/Kolkata",),
    "id": ("Asia/Jakarta",),
    "vi": ("Asia/Ho_Chi_Minh",),
    "th": ("Asia/Bangkok",),
    "he": ("Asia/Jerusalem",),
    "ar": ("Asia/Riyadh", "Africa/Cairo", "Asia/Dubai"),
}

# Zones a clock time is matched against: one or more per offset in common use.
COMMON = (
    "Pacific/Honolulu", "America/Anchorage", "America/Los_Angeles", "America/Denver",
    "America/Chicago", "America/New_York", "America/Halifax", "America/Sao_Paulo",
    "Atlantic/Azores", "Europe/London", "Europe/Lisbon", "Europe/Paris", "Europe/Berlin",
    "Africa/Lagos", "Europe/Athens", "Europe/Helsinki", "Africa/Cairo", "Europe/Moscow",
    "Europe/Istanbul", "Asia/Tehran", "Asia/Dubai", "Asia/Kabul", "Asia/Karachi",
    "Asia/Kolkata", "Asia/Kathmandu", "Asia/Dhaka", "Asia/Bangkok", "Asia/Jakarta",
    "Asia/Shanghai", "Asia/Singapore", "Australia/Perth", "Asia/Tokyo", "Asia/Seoul",
    "Australia/Adelaide", "Australia/Brisbane", "Australia/Sydney", "Pacific/Noumea",
    "Pacific/Auckland",
)  # fmt: skip


def likely_zones(
    locale: str | None = None, local_zone: str | None = None, limit: int = 4
) -> tuple[str, ...]:
    """Zones to offer first: the machine's own zone, then those of the locale's region
    ('en-US', 'pt_BR') or language ('de'), then a generic few; at most `limit`."""
    found: list[str] = []
    if local_zone and local_zone != "UTC":
        found.append(local_zone)
    tag = (locale or "").replace("_", "-").lower().split("-")
    if len(tag) > 1 and tag[1] in BY_REGION:
        found += BY_REGION[tag[1]]
    elif tag[0] in BY_LANGUAGE:
        found += BY_LANGUAGE[tag[0]]
    found += GENERIC
    return tuple(dict.fromkeys(found))[:limit]


def offset_of(zone: str, now: datetime) -> timedelta:
    """The zone's offset from UTC at `now`."""
    return now.astimezone(ZoneInfo(zone)).utcoffset() or timedelta(0)


def offset_for_clock(now: datetime, local_minutes: int, slack: int = 20) -> timedelta | None:
    """The UTC offset at which the local clock reads `local_minutes` after midnight at
    `now`: the nearest whole hour when within `slack` minutes (people round: 'it's 3pm'
    at 14:52), else the nearest quarter hour (India, Nepal); None when neither is."""
    utc_minutes = now.hour * 60 + now.minute
    diff = (local_minutes - utc_minutes) % 1440
    if diff >= 14 * 60 + slack:  # offsets run from -12:00 to +14:00
        diff -= 1440
    nearest = round(diff / 60) * 60
    if abs(diff - nearest) > slack:
        nearest = round(diff / 15) * 15
    if abs(diff - nearest) > slack or not -12 * 60 <= nearest <= 14 * 60:
        return None
    return timedelta(minutes=nearest)


def zones_at_offset(now: datetime, offset: timedelta, slack: timedelta) -> tuple[str, ...]:
    """Common zones whose offset at `now` is within `slack` of `offset`, nearest first."""
    near = [(abs(offset_of(z, now) - offset), z) for z in COMMON]
    return tuple(z for gap, z in sorted(near, key=lambda p: p[0]) if gap <= slack)
