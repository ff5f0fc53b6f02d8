"""Finding the timezone a person means, offline: IANA names, common cities (with their
region or country, in any case, with or without accents), countries, and a list to
choose from when a name fits places in different zones."""

from __future__ import annotations

from importlib import resources
from zoneinfo import ZoneInfo

import pytest

from bot.timezones import _table, find_timezone, fold, resolve_timezone, suggestions


def test_every_city_keeps_a_real_zone_of_its_own_country() -> None:
    listed = resources.files("tzdata").joinpath("zoneinfo", "zone.tab").read_text("utf-8")
    zone_tab = {
        (line.split("\t")[0], line.split("\t")[2])
        for line in listed.splitlines()
        if line and not line.startswith("#")
    }
    entries = _table().entries
    assert len(entries) >= 300
    for entry in entries:
        ZoneInfo(entry.place.timezone)  # raises for a zone that does not exist
        assert (entry.code, entry.place.timezone) in zone_tab, entry


@pytest.mark.parametrize(
    ("typed", "zone"),
    [
        ("San Francisco", "America/Los_Angeles"),
        ("seattle", "America/Los_Angeles"),
        ("Beijing", "Asia/Shanghai"),
        ("SHANGHAI", "Asia/Shanghai"),
        ("Mumbai", "Asia/Kolkata"),
        ("Bombay", "Asia/Kolkata"),
        ("New Delhi", "Asia/Kolkata"),
        ("Bengaluru", "Asia/Kolkata"),
        ("Munich", "Europe/Berlin"),
        ("MÜNCHEN", "Europe/Berlin"),
        ("Sydney", "Australia/Sydney"),
        ("Toronto", "America/Toronto"),
        ("Zürich", "Europe/Zurich"),
        ("zurich", "Europe/Zurich"),
        ("sao paulo", "America/Sao_Paulo"),
        ("São Paulo, Brasil", "America/Sao_Paulo"),
        ("St. Louis", "America/Chicago"),
        ("Saint Louis, MO", "America/Chicago"),
        ("St John's", "America/St_Johns"),
        ("Xi'an", "Asia/Shanghai"),
        ("Cluj Napoca", "Europe/Bucharest"),
        ("  new   york ", "America/New_York"),
        ("Copenhagen", "Europe/Copenhagen"),
        ("Kinshasa", "Africa/Kinshasa"),  # only the IANA names know it
        ("Europe/Copenhagen", "Europe/Copenhagen"),
        ("america/new york", "America/New_York"),
        ("UTC", "UTC"),
        ("Portland, Oregon", "America/Los_Angeles"),
        ("portland maine", "America/New_York"),
        ("Valencia, Spain", "Europe/Madrid"),
        ("Valencia Venezuela", "America/Caracas"),
        ("Hyderabad, India", "Asia/Kolkata"),
        ("Birmingham, UK", "Europe/London"),
        ("Cambridge, MA", "America/New_York"),
        ("Perth, Western Australia, Australia", "Australia/Perth"),
        ("San Jose, Costa Rica", "America/Costa_Rica"),
        ("Japan", "Asia/Tokyo"),
        ("Deutschland", "Europe/Berlin"),
    ],
)
def test_names_cities_and_countries(typed: str, zone: str) -> None:
    assert resolve_timezone(typed) == zone


@pytest.mark.parametrize(
    ("typed", "zones"),
    [
        ("Portland", {"America/New_York", "America/Los_Angeles"}),
        ("valencia", {"Europe/Madrid", "America/Caracas"}),
        ("Hamilton", {"America/Toronto", "Pacific/Auckland"}),
        ("Birmingham", {"Europe/London", "America/Chicago"}),
    ],
)
def test_a_name_of_places_in_different_zones_lists_them(typed: str, zones: set[str]) -> None:
    answer = find_timezone(typed)
    assert answer.timezone is None
    assert {place.timezone for place in answer.candidates} == zones
    assert all(typed.lower() in place.label.lower() for place in answer.candidates)


def test_a_country_with_several_zones_lists_its_main_ones() -> None:
    answer = find_timezone("United States")
    assert answer.timezone is None and len(answer.candidates) == 8
    assert {p.timezone for p in answer.candidates[:4]} == {
        "America/New_York",
        "America/Los_Angeles",
        "America/Chicago",
        "America/Denver",
    }  # the zones with most cities come first


@pytest.mark.parametrize(
    "typed", ["Atlantis", "", "   ", "x" * 65, "Portland, Texas", "Paris, Japan"]
)
def test_unknown_places_are_none(typed: str) -> None:
    assert find_timezone(typed).timezone is None and find_timezone(typed).candidates == ()


def test_suggestions_for_a_misspelt_city_and_folding() -> None:
    assert suggestions("Copenhagn") == ["Copenhagen"]
    assert suggestions("Qwertyuiop") == []
    assert fold(" Ste. Anne-des-Monts ") == "saint anne des monts"
