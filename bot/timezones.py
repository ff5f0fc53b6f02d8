"""Which timezone a person means: an IANA name ('Europe/Copenhagen'), a city from an
offline table of common cities (`data/cities.csv`, countries in `data/countries.csv`) or
from the IANA names themselves, a city with its region or country ('Portland, Oregon',
'Valencia Spain'), or a country. Case, accents and 'St.' do not matter. When a name fits
places in different zones, the answer lists them instead of guessing.
"""

from __future__ import annotations

import csv
import difflib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from zoneinfo import available_timezones

MAX_TEXT = 64
MAX_CANDIDATES = 8


@dataclass(frozen=True, slots=True)
class Place:
    """A city (or zone) and the zone it keeps time by."""

    name: str
    region: str
    country: str
    timezone: str

    @property
    def label(self) -> str:
        """'Portland, Oregon, United States'."""
        return ", ".join(part for part in (self.name, self.region, self.country) if part)


@dataclass(frozen=True, slots=True)
class ZoneAnswer:
    """The zone meant (None when unknown or ambiguous), and the places it could be."""

    timezone: str | None
    candidates: tuple[Place, ...] = ()


@dataclass(frozen=True, slots=True)
class _Entry:
    place: Place
    code: str  # the country's ISO code
    qualifiers: frozenset[str]  # folded region and country names a person may add


@dataclass(frozen=True, slots=True)
class _Table:
    entries: tuple[_Entry, ...]  # in file order
    by_city: dict[str, tuple[_Entry, ...]]  # folded city name (and its other names)
    countries: dict[str, str]  # folded country name or code → code


def fold(text: str) -> str:
    """'St. John's', ' ZÜRICH ' → 'saint johns', 'zurich': no accents, case or dots."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    plain = re.sub(r"['’.]", "", plain)
    words = re.sub(r"[\s_\-]+", " ", plain).strip().split(" ")
    if words[0] in {"st", "ste"}:
        words[0] = "saint"
    return " ".join(words)


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("bot").joinpath("data", name).read_text("utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines))


@lru_cache(maxsize=1)
def _table() -> _Table:
    names = {row["code"]: row["names"].split("|") for row in _rows("countries.csv")}
    entries: list[_Entry] = []
    by_city: dict[str, list[_Entry]] = {}
    for row in _rows("cities.csv"):
        cities, regions = row["city"].split("|"), [r for r in row["region"].split("|") if r]
        code = row["country"]
        place = Place(cities[0], regions[0] if regions else "", names[code][0], row["timezone"])
        qualifiers = frozenset(fold(q) for q in [*regions, *names[code], code])
        entry = _Entry(place, code, qualifiers)
        entries.append(entry)
        for city in cities:
            by_city.setdefault(fold(city), []).append(entry)
    countries = {fold(n): code for code, all_names in names.items() for n in [*all_names, code]}
    return _Table(tuple(entries), {k: tuple(v) for k, v in by_city.items()}, countries)


@lru_cache(maxsize=1)
def _zones() -> tuple[dict[str, str], dict[str, str]]:
    """IANA names by their case-folded full name, and by their folded city part."""
    by_name: dict[str, str] = {}
    by_city: dict[str, str] = {}
    for zone in sorted(available_timezones()):
        if zone.startswith(("Etc/", "SystemV/")) or ("/" not in zone and zone != "UTC"):
            continue
        by_name.setdefault(zone.casefold(), zone)
        by_city.setdefault(fold(zone.rsplit("/", 1)[-1]), zone)
    return by_name, by_city


def _answer(places: list[Place]) -> ZoneAnswer:
    """One zone among the places: that zone; several: the places, to choose from."""
    unique = list(dict.fromkeys(places))
    if len({p.timezone for p in unique}) == 1:
        return ZoneAnswer(unique[0].timezone, tuple(unique))
    return ZoneAnswer(None, tuple(unique[:MAX_CANDIDATES]))


def _in_city(city: str, qualifiers: list[str]) -> list[Place]:
    """The places named `city` that every qualifier (region or country) fits; a city
    only the IANA names know when nothing qualifies it."""
    entries = _table().by_city.get(city, ())
    if entries:
        return [e.place for e in entries if all(q in e.qualifiers for q in qualifiers)]
    zone = _zones()[1].get(city)
    if zone is None or qualifiers:
        return []
    return [Place(zone.rsplit("/", 1)[-1].replace("_", " "), "", "", zone)]


def _in_country(key: str) -> list[Place]:
    """A country's zones, the one with most listed cities first, each named by its first
    city in the table."""
    code = _table().countries.get(key)
    entries = [e for e in _table().entries if e.code == code]
    weight = Counter(e.place.timezone for e in entries)
    first: dict[str, Place] = {}
    for entry in entries:
        first.setdefault(entry.place.timezone, entry.place)
    return sorted(first.values(), key=lambda p: -weight[p.timezone])


def _readings(key: str) -> list[tuple[str, list[str]]]:
    """Ways to read `key` as a city and qualifiers: by its commas, else the whole of it,
    then with its last words as the region or country ('san jose costa rica')."""
    parts = [part.strip() for part in key.split(",") if part.strip()]
    if len(parts) > 1:
        return [(parts[0], parts[1:])]
    words = key.split(" ")
    return [(key, [])] + [
        (" ".join(words[:i]), [" ".join(words[i:])]) for i in range(len(words) - 1, 0, -1)
    ]


def find_timezone(text: str) -> ZoneAnswer:
    """The zone `text` names, or the places it could mean, or nothing."""
    raw = " ".join(text.strip().split())
    if not raw or len(raw) > MAX_TEXT:
        return ZoneAnswer(None)
    exact = _zones()[0].get(raw.replace(" ", "_").casefold())
    if exact is not None:
        return ZoneAnswer(exact)
    key = ",".join(fold(part) for part in raw.split(","))
    for city, qualifiers in _readings(key):
        places = _in_city(city, qualifiers)
        if places:
            return _answer(places)
    return _answer(_in_country(fold(raw.replace(",", " "))))


def resolve_timezone(text: str) -> str | None:
    """The one zone `text` names, or None."""
    return find_timezone(text).timezone


def suggestions(text: str, limit: int = 3) -> list[str]:
    """Listed cities whose names are close to a misspelt one ('Copenhagn')."""
    names = {fold(e.place.name): e.place.name for e in _table().entries}
    key = fold(text.split(",")[0]) if text.strip() else ""
    return [names[m] for m in difflib.get_close_matches(key, list(names), n=limit, cutoff=0.8)]
