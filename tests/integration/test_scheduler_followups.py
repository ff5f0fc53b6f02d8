"""Follow-ups after remembered events: once per event after its time plus a delay,
under the same rules as check-ins, folded into the daily check-in on the same day."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from bot.bootstrap import Core
from scheduler.checkins import minute_tick
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.integration.test_scheduler_support import (
    add_person,
    drafts,
    outreach_rows,
    recording,
    remember_event,
    say,
    scheduler_deps,
    statuses,
)

MONDAY = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


async def test_one_followup_after_the_event_has_passed(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = MONDAY
    delivery = recording(core)
    answer = drafts(scripted_llm, message="How did the interview at Acme go?")
    alice = await add_person(core, checkin=None)
    event = await remember_event(
        core, alice, "Job interview at Acme", datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    )
    deps = scheduler_deps(core)
    clock.current = datetime(2026, 3, 2, 15, 59, tzinfo=UTC)
    await minute_tick(deps)
    assert await outreach_rows(core, alice) == []

    clock.current = datetime(2026, 3, 2, 16, 1, tzinfo=UTC)
    await minute_tick(deps)
    assert [m.text for _, m in delivery.sent] == ["How did the interview at Acme go?"]
    (row,) = await outreach_rows(core, alice)
    assert (row.kind, row.status, row.memory_id) == ("followup", "sent", event.id)
    assert row.idempotency_key == f"followup:{alice}:{event.id}"
    assert "Job interview at Acme (Mon 2 Mar, 14:00)" in answer.prompts[-1]
    assert "daily check-in" not in answer.prompts[-1]

    clock.advance(hours=5)
    await minute_tick(deps)
    assert len(delivery.sent) == 1 and len(await outreach_rows(core, alice)) == 1


async def test_a_followup_on_the_day_of_the_checkin_is_folded_into_it(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    delivery = recording(core)
    answer = drafts(scripted_llm, message="Morning! How was the early dentist visit?")
    alice = await add_person(core, checkin=time(9), quiet=None)
    dentist = await remember_event(
        core, alice, "Dentist appointment", datetime(2026, 3, 2, 6, 0, tzinfo=UTC)
    )
    party = await remember_event(
        core, alice, "Sister's birthday party", datetime(2026, 3, 1, 0, 0, tzinfo=UTC)
    )  # a date without a time: asked about from the end of that day
    deps = scheduler_deps(core)
    clock.current = datetime(2026, 3, 2, 8, 5, tzinfo=UTC)
    await minute_tick(deps)
    assert await outreach_rows(core, alice) == []  # waits for the check-in at 09:00

    clock.current = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)
    await minute_tick(deps)
    assert len(delivery.sent) == 1
    rows = await outreach_rows(core, alice)
    assert [(r.kind, r.status, r.memory_id) for r in rows] == [
        ("checkin", "sent", None),
        ("followup", "sent", party.id),
        ("followup", "sent", dentist.id),
    ]
    assert {r.merged_into for r in rows[1:]} == {rows[0].id}
    prompt = answer.prompts[-1]
    assert "daily check-in" in prompt
    assert "Dentist appointment" in prompt and "Sister's birthday party" in prompt


async def test_a_followup_in_quiet_hours_waits_until_they_end(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = MONDAY
    delivery = recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=None)
    await remember_event(core, alice, "Concert in town", datetime(2026, 3, 2, 21, 0, tzinfo=UTC))
    deps = scheduler_deps(core)
    clock.current = datetime(2026, 3, 2, 23, 1, tzinfo=UTC)
    await minute_tick(deps)
    assert await statuses(core, alice) == [("followup", "pending", None)]
    assert delivery.sent == []
    (row,) = await outreach_rows(core, alice)
    assert row.lease_until == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)

    clock.current = datetime(2026, 3, 3, 3, 0, tzinfo=UTC)
    await minute_tick(deps)
    assert delivery.sent == []
    clock.current = datetime(2026, 3, 3, 8, 1, tzinfo=UTC)
    await minute_tick(deps)
    assert await statuses(core, alice) == [("followup", "sent", None)]
    assert len(delivery.sent) == 1


async def test_no_followup_when_they_talked_since_or_mentioned_it_afterwards(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = MONDAY
    delivery = recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=None)
    await remember_event(
        core, alice, "Job interview at Acme", datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    )
    clock.current = datetime(2026, 3, 2, 13, 0, tzinfo=UTC)
    await remember_event(core, alice, "Lunch with Tom", datetime(2026, 3, 2, 11, 0, tzinfo=UTC))
    clock.current = datetime(2026, 3, 2, 12, 30, tzinfo=UTC)
    await say(core, "the interview went fine")
    clock.current = datetime(2026, 3, 2, 16, 0, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert await statuses(core, alice) == [("followup", "skipped", "talked_since")]
    assert delivery.sent == []


async def test_a_forgotten_event_is_never_followed_up(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = MONDAY
    delivery = recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=None)
    event = await remember_event(
        core, alice, "Doctor appointment", datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    )
    await core.memories.forget(alice, event.short_id)
    clock.current = datetime(2026, 3, 2, 16, 0, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert await outreach_rows(core, alice) == [] and delivery.sent == []


async def test_followups_follow_the_same_rules_as_checkins(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = MONDAY
    recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=None)
    await core.store.update_person(alice, paused=True)
    await remember_event(
        core, alice, "Job interview at Acme", datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    )
    clock.current = datetime(2026, 3, 2, 16, 0, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert await statuses(core, alice) == [("followup", "skipped", "paused")]
    assert not [r for r in scripted_llm.requests if r.force_tool == "decide_checkin"]


async def test_old_events_are_not_followed_up_after_a_long_downtime(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = MONDAY - timedelta(days=10)
    recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=None)
    await remember_event(core, alice, "Job interview at Acme", MONDAY - timedelta(days=5))
    clock.current = MONDAY
    await minute_tick(scheduler_deps(core))
    assert await outreach_rows(core, alice) == []
