"""Introductions: first contact on every platform asks for the timezone (buttons for
likely zones, free text for a city); a mention of where someone lives or their local
time is offered as their timezone, one tap to confirm; no scheduled message before the
timezone is known, and someone who never answers is asked again once, never messaged at
a UTC hour."""

from __future__ import annotations

import re
from datetime import date, timedelta

from sqlalchemy import select

from memory.store.tables import User
from tests.scenarios.harness import Mark, Person, Sent, World, assert_quiet_nights, buttons_of

MONDAY = date(2026, 10, 19)
ASKS_TIMEZONE = re.compile(r"time ?zone", re.IGNORECASE)


def timezone_questions(world: World, person: Person) -> list[Sent]:
    """Messages to the person that ask for their timezone with buttons to answer."""
    return [s for s in world.sent_to(person) if ASKS_TIMEZONE.search(s.text) and buttons_of(s)]


def checkins_to(world: World, person: Person, mark: Mark | None = None) -> list[Sent]:
    """What was sent to the person on the companion's own initiative, timezone questions
    aside."""
    return [
        s
        for s in world.sent_to(person, mark, proactive=True)
        if not (ASKS_TIMEZONE.search(s.text) and buttons_of(s))
    ]


async def _timezone(world: World, person: Person) -> str | None:
    """The timezone stored for the person."""
    user_id = await person.user_id()
    async with world.core.sessions() as db:
        return await db.scalar(select(User.timezone).where(User.id == user_id))


async def _confirm_if_offered(person: Person, reply: Sent | None, *labels: str) -> None:
    """One tap: press the first offered button naming one of `labels`."""
    if reply is None:
        return
    for label in labels:
        if any(label.lower() in b.label.lower() for b in buttons_of(reply)):
            await person.press(reply, label)
            return


async def test_first_contact_asks_the_timezone_with_buttons(world: World, maya: Person) -> None:
    await world.advance_to(maya.at(MONDAY, "10:00"))
    await maya.says("hi! a friend told me about you")
    await world.advance(minutes=1)
    (question,) = timezone_questions(world, maya)
    assert question.at <= maya.at(MONDAY, "10:01")
    await maya.press(question, "Los Angeles")
    assert await _timezone(world, maya) == "America/Los_Angeles"

    await world.advance_to(maya.at(MONDAY + timedelta(days=2), "12:00"))
    checkins = checkins_to(world, maya)
    assert [maya.local(s.at).strftime("%a %H:%M") for s in checkins] == ["Tue 09:00", "Wed 09:00"]
    assert len(timezone_questions(world, maya)) == 1  # answered: never asked again


async def test_a_city_in_free_text_answers_the_question(world: World, tomas: Person) -> None:
    await world.advance_to(tomas.at(MONDAY, "08:30"))
    await tomas.says("olá! first time here")
    (question,) = timezone_questions(world, tomas)
    answer = await tomas.says("Lisbon")
    await _confirm_if_offered(tomas, world.sent_to(tomas)[-1], "Lisbon", "Yes")
    assert answer.text
    assert await _timezone(world, tomas) == "Europe/Lisbon"
    await world.advance_to(tomas.at(MONDAY + timedelta(days=1), "12:00"))
    (checkin,) = checkins_to(world, tomas)
    assert tomas.local(checkin.at).strftime("%a %H:%M") == "Tue 09:00"
    assert question.at < checkin.at


async def test_no_scheduled_message_before_the_timezone_is_known(
    world: World, aiko: Person
) -> None:
    await world.advance_to(aiko.at(MONDAY, "16:05"))
    await aiko.says("hello")
    await aiko.says("just trying this out")
    await world.advance_to(aiko.at(MONDAY + timedelta(days=3), "23:00"))

    questions = timezone_questions(world, aiko)
    assert len(questions) == 2, world.transcript(aiko)  # first contact, and once again
    proactive = world.sent_to(aiko, proactive=True)
    assert all(ASKS_TIMEZONE.search(s.text) for s in proactive), world.transcript(aiko)
    assert not [p for p in world.model.prompts if p.tool == "decide_checkin"]

    # She mentions where she is: the companion offers it, one tap sets it.
    mark = world.mark()
    await aiko.says("it's 11pm here in Tokyo and I'm still at the office")
    offers = [s for s in world.sent_to(aiko, mark) if "Tokyo" in s.text and buttons_of(s)]
    assert offers, world.transcript(aiko, mark)
    await _confirm_if_offered(aiko, offers[0], "Yes", "Tokyo", "Set")
    assert await _timezone(world, aiko) == "Asia/Tokyo"
    await world.advance_to(aiko.at(MONDAY + timedelta(days=5), "12:00"))
    checkins = checkins_to(world, aiko, mark)
    assert [aiko.local(s.at).strftime("%a %H:%M") for s in checkins] == ["Fri 09:00", "Sat 09:00"]
    assert_quiet_nights(world, aiko, mark)
