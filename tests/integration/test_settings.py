"""`/timezone` with city names and `/settings` menus through the core on real
PostgreSQL: every change saved and the next check-in rescheduled in the new zone; a
name of several places asks which one; an unknown one changes nothing."""

from __future__ import annotations

from datetime import time

from sqlalchemy import select

from bot.bootstrap import Core
from memory.store.tables import User
from tests.support.catalog import user_id_of
from tests.support.commands import labels, press, run


async def alice_row(core: Core) -> User:
    """Alice's settings as stored."""
    alice = await user_id_of(core.sessions, "alice")
    async with core.sessions() as db:
        row = await db.scalar(select(User).where(User.id == alice))
    assert row is not None
    return row


async def test_a_city_sets_its_zone_and_moves_the_next_checkin(core: Core) -> None:
    reply = await run(core, "/timezone San Francisco")
    assert reply.text == "Timezone set to America/Los_Angeles."
    row = await alice_row(core)
    assert row.timezone == "America/Los_Angeles"
    assert row.next_checkin_at is not None  # 09:00 in San Francisco, the clock at 09:00 UTC
    assert row.next_checkin_at.isoformat() == "2026-03-02T17:00:00+00:00"
    assert "Asia/Kolkata" in (await run(core, "/timezone bengaluru")).text
    assert "Europe/Berlin" in (await run(core, "/timezone München, Deutschland")).text


async def test_a_name_of_several_places_asks_which_one(core: Core) -> None:
    reply = await run(core, "/timezone Portland")
    assert "could be more than one place" in reply.text
    assert "Portland, Oregon, United States — America/Los_Angeles" in reply.text
    assert sorted(labels(reply)) == ["Portland, Maine", "Portland, Oregon"]
    assert (await alice_row(core)).timezone == "UTC"  # nothing chosen yet
    chosen = await press(core, reply, "Portland, Maine")
    assert chosen.text == "Timezone set to America/New_York."
    assert (await alice_row(core)).timezone == "America/New_York"


async def test_an_unknown_place_suggests_and_changes_nothing(core: Core) -> None:
    await run(core, "/timezone Tokyo")
    reply = await run(core, "/timezone Copenhagn")
    assert "I don't know the timezone “Copenhagn”. Did you mean Copenhagen?" in reply.text
    assert (await alice_row(core)).timezone == "Asia/Tokyo"


async def test_the_timezone_menu_in_settings(core: Core) -> None:
    view = await run(core, "/settings")
    assert labels(view)[:3] == ["Timezone…", "Check-in time…", "Quiet hours…"]
    menu = await press(core, view, "Timezone…")
    assert "/timezone" in menu.text and {"London", "New York", "Tokyo", "UTC"} <= set(labels(menu))
    assert (await press(core, menu, "Tokyo")).text == "Timezone set to Asia/Tokyo."
    row = await alice_row(core)
    assert row.timezone == "Asia/Tokyo" and row.next_checkin_at is not None
    assert row.next_checkin_at.isoformat() == "2026-03-03T00:00:00+00:00"  # 09:00 in Tokyo
    assert "Timezone: Asia/Tokyo" in (await run(core, "/settings")).text


async def test_the_quiet_hours_menu(core: Core) -> None:
    menu = await press(core, await run(core, "/settings"), "Quiet hours…")
    assert labels(menu) == ["22:00-08:00", "23:00-07:00", "21:00-09:00", "off"]
    assert "23:00–07:00" in (await press(core, menu, "23:00-07:00")).text
    row = await alice_row(core)
    assert (row.quiet_start, row.quiet_end) == (time(23), time(7))
    assert "Quiet hours are off" in (await press(core, menu, "off")).text
    row = await alice_row(core)
    assert (row.quiet_start, row.quiet_end) == (None, None)
    assert "Quiet hours: off" in (await run(core, "/settings")).text


async def test_the_pause_and_resume_buttons(core: Core) -> None:
    await run(core, "/timezone Copenhagen")  # nothing is scheduled before it is known
    paused = await press(core, await run(core, "/settings"), "Pause")
    assert "Messages I start: paused" in paused.text and "Resume" in labels(paused)
    row = await alice_row(core)
    assert row.paused and row.next_checkin_at is None
    resumed = await press(core, paused, "Resume")
    assert "Messages I start: on" in resumed.text and "Pause" in labels(resumed)
    row = await alice_row(core)
    assert not row.paused and row.next_checkin_at is not None
