"""The timezone, through the core on real PostgreSQL with a controllable clock: the first
reply asks for it (with buttons for likely zones) and still answers; a person who never
answers is asked once more a day later in a reply, then never, and gets no check-in or
follow-up at a UTC hour; saying where they live or what time it is offers the zone."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from bot.bootstrap import Core
from bot.domain import IncomingMessage
from bot.timezone_onboarding import ASKED_AGAIN, QUESTION
from memory.store.tables import User
from scheduler.checkins import minute_tick
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.delivery import RecordingDelivery
from tests.integration.test_scheduler_support import (
    add_person,
    drafts,
    outreach_rows,
    recording,
    remember_event,
    scheduler_deps,
)
from tests.support.catalog import user_id_of
from tests.support.commands import labels, press, run


async def alice_row(core: Core) -> User:
    alice = await user_id_of(core.sessions, "alice")
    async with core.sessions() as db:
        row = await db.scalar(select(User).where(User.id == alice))
    assert row is not None
    return row


async def test_the_first_reply_answers_and_asks_with_buttons_for_likely_zones(
    core: Core, scripted_llm: ScriptedLLM
) -> None:
    first = IncomingMessage("console", "alice", "hello!", chat_id="chat-alice", locale="en-US")
    reply = await core.router.handle(first)
    assert reply.text.startswith("Tell me more.") and QUESTION in reply.text
    assert labels(reply) == ["New York", "Chicago", "Denver", "Los Angeles", "Other…"]
    assert len(scripted_llm.chat_requests) == 1  # the message itself was answered
    row = await alice_row(core)
    assert (row.timezone_known, row.timezone_asks, row.next_checkin_at) == (False, 1, None)

    second = await run(core, "how are you?")
    assert QUESTION not in second.text and second.buttons == ()  # not again the same day

    chosen = await press(core, reply, "Los Angeles")
    assert chosen.text == "Timezone set to America/Los_Angeles."
    row = await alice_row(core)
    assert row.timezone_known and row.timezone == "America/Los_Angeles"
    assert row.next_checkin_at == datetime(2026, 3, 2, 17, 0, tzinfo=UTC)  # 09:00 there


async def test_a_group_message_never_asks(core: Core) -> None:
    group = IncomingMessage("console", "alice", "hi all", chat_id="group-1", is_private=False)
    reply = await core.router.handle(group)
    assert QUESTION not in reply.text and reply.buttons == ()


async def test_the_other_button_lists_every_preset_zone(core: Core) -> None:
    reply = await run(core, "hi")
    menu = await press(core, reply, "Other…")
    assert {"London", "Tokyo", "Sydney"} <= set(labels(menu))


async def test_never_answering_is_asked_once_more_at_their_hour_and_never_checked_in(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    deps, other_process = scheduler_deps(core), scheduler_deps(core)
    clock.advance(hours=7, minutes=20)  # 16:20 UTC
    assert QUESTION in (await run(core, "hi")).text
    assert QUESTION not in (await run(core, "just trying this out")).text
    sent_at = []
    for _ in range(3 * 24 * 4):  # three days of quarter-hour ticks, two processes each
        clock.advance(minutes=15)
        before = len(delivery.sent)
        await minute_tick(deps)
        await minute_tick(other_process)
        sent_at += [clock.current] * (len(delivery.sent) - before)
    assert sent_at == [datetime(2026, 3, 3, 16, 20, tzinfo=UTC)]  # a day after, once
    ((_, asked),) = delivery.sent
    assert asked.text == ASKED_AGAIN and asked.private
    assert labels(asked)[-1] == "Other…"
    row = await alice_row(core)
    assert (row.timezone_asks, row.next_checkin_at, row.timezone_known) == (2, None, False)
    assert not [r for r in scripted_llm.requests if r.force_tool == "decide_checkin"]

    chosen = await press(core, asked, labels(asked)[0])
    assert chosen.text.startswith("Timezone set to")


async def test_a_missed_hour_skips_the_second_question(core: Core, clock: FakeClock) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    assert QUESTION in (await run(core, "hi")).text
    clock.advance(hours=26)  # the process was down at their hour
    await minute_tick(scheduler_deps(core))
    clock.advance(days=1)
    await minute_tick(scheduler_deps(core))
    assert delivery.sent == []
    assert (await alice_row(core)).timezone_asks == 1


async def test_writing_again_a_day_later_asks_in_the_reply_and_not_on_its_own(
    core: Core, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    assert QUESTION in (await run(core, "hi")).text
    clock.advance(hours=24, minutes=5)
    assert QUESTION in (await run(core, "evening chat")).text  # the second ask
    for _ in range(48):
        clock.advance(hours=1)
        await minute_tick(scheduler_deps(core))
    assert delivery.sent == [] and (await alice_row(core)).timezone_asks == 2


async def test_living_in_berlin_offers_the_zone_and_one_tap_sets_it(core: Core) -> None:
    await run(core, "/timezone UTC")  # known, but not Berlin
    reply = await run(core, "I live in Berlin these days")
    assert reply.text.startswith("Tell me more.")
    assert "Shall I set your timezone to Europe/Berlin?" in reply.text
    assert labels(reply) == ["Set timezone to Europe/Berlin"]
    again = await run(core, "I live in Berlin, as I said")
    assert again.buttons == ()  # not offered twice

    assert (await press(core, reply, "Set timezone")).text == "Timezone set to Europe/Berlin."
    row = await alice_row(core)
    assert row.timezone == "Europe/Berlin" and row.timezone_known
    assert row.next_checkin_at == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)  # 09:00 in Berlin
    assert (await run(core, "I moved to Berlin last year")).buttons == ()  # already so


async def test_the_first_message_naming_a_city_offers_it_instead_of_asking(core: Core) -> None:
    reply = await run(core, "hi! I just moved to Lisbon")
    assert labels(reply) == ["Set timezone to Europe/Lisbon"] and QUESTION not in reply.text
    assert (await alice_row(core)).timezone_asks == 1  # that counts as asking
    assert (await run(core, "anyway")).buttons == ()


async def test_a_bare_city_after_the_question_offers_its_zone(core: Core) -> None:
    assert QUESTION in (await run(core, "hi")).text
    reply = await run(core, "Lisbon")
    assert reply.text.startswith("Tell me more.")
    assert labels(reply) == ["Set timezone to Europe/Lisbon"]
    assert (await press(core, reply, "Set timezone")).text == "Timezone set to Europe/Lisbon."
    row = await alice_row(core)
    assert row.timezone == "Europe/Lisbon" and row.timezone_known
    assert (await run(core, "Lisbon")).buttons == ()  # known now: a city is just a city


async def test_a_bare_city_once_the_zone_is_known_is_just_a_message(core: Core) -> None:
    await run(core, "/timezone UTC")
    assert (await run(core, "Paris")).buttons == ()


async def test_an_ambiguous_city_offers_each_zone(core: Core) -> None:
    await run(core, "hi")
    reply = await run(core, "in Portland")
    assert labels(reply) == [
        "Set timezone to America/New_York",
        "Set timezone to America/Los_Angeles",
    ]


async def test_a_stated_clock_time_offers_the_zones_at_that_offset(
    core: Core, clock: FakeClock
) -> None:
    await run(core, "/timezone UTC")
    clock.current = datetime(2026, 3, 2, 14, 2, tzinfo=UTC)
    reply = await run(core, "it's 3pm here and I'm tired")
    assert "Is one of these your timezone?" in reply.text
    assert labels(reply) == [
        "Set timezone to Europe/Paris",
        "Set timezone to Europe/Berlin",
        "Set timezone to Africa/Lagos",
    ]
    assert (await run(core, "it's 15:05 here now")).buttons == ()  # the same offset again
    clock.current = datetime(2026, 3, 2, 14, 40, tzinfo=UTC)
    late = await run(core, "it's almost midnight")
    assert "Set timezone to Asia/Tokyo" in labels(late)


async def test_a_clock_time_that_matches_the_known_zone_offers_nothing(
    core: Core, clock: FakeClock
) -> None:
    await run(core, "/timezone Paris")
    clock.current = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    assert (await run(core, "it's 3pm here")).buttons == ()
    assert (await run(core, "I live in Paris")).buttons == ()


async def test_start_asks_with_buttons_and_the_first_message_does_not_ask_again(
    core: Core,
) -> None:
    start = await run(core, "/start")
    assert "/memory" in start.text and "which timezone are you in?" in start.text
    assert "Other…" in labels(start)
    reply = await run(core, "hello")
    assert QUESTION not in reply.text
    await press(core, start, "London")
    assert "Your timezone is Europe/London" in (await run(core, "/start")).text


async def test_a_followup_waits_until_the_timezone_is_known(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    delivery = recording(core)
    drafts(scripted_llm, message="How did the interview go?")
    alice = await add_person(core, checkin=None)
    await core.store.update_person(alice, timezone_known=False)
    await remember_event(core, alice, "Job interview", datetime(2026, 3, 2, 14, 0, tzinfo=UTC))
    deps = scheduler_deps(core)
    clock.current = datetime(2026, 3, 2, 16, 30, tzinfo=UTC)
    await minute_tick(deps)
    assert delivery.sent == [] and await outreach_rows(core, alice) == []

    await run(core, "/timezone Europe/London")
    await minute_tick(deps)
    assert [m.text for _, m in delivery.sent] == ["How did the interview go?"]
