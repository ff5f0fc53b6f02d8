"""Daily check-ins on real PostgreSQL with a controllable clock: scheduled in the
person's timezone (DST-correct), the rules in code before any model call, silence,
and never twice: not on a second run, not from two processes, not after a crash."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.bootstrap import Core
from bot.domain import Recipient, Reply
from bot.outbound import Outbound
from memory.store.conversations import SqlConversationStore
from memory.store.database import create_engine, session_factory
from memory.store.tables import Message, User
from scheduler.checkins import minute_tick, run_checkins
from scheduler.deps import SchedulerDeps
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.delivery import RecordingDelivery
from tests.integration.test_scheduler_support import (
    add_person,
    drafts,
    next_checkin_at,
    outreach_rows,
    recording,
    say,
    scheduler_deps,
    set_unreachable,
    statuses,
)

COPENHAGEN = "Europe/Copenhagen"
NEW_YORK = "America/New_York"


def checkin_requests(llm: ScriptedLLM) -> int:
    return sum(1 for r in llm.requests if r.force_tool == "decide_checkin")


async def run_until(core: Core, deps: SchedulerDeps, clock: FakeClock, end: datetime) -> None:
    """Jump the clock to each next due check-in (plus 30 s) and tick, until `end`."""
    while True:
        async with core.sessions() as db:
            due = await db.scalar(select(User.next_checkin_at).order_by(User.next_checkin_at))
        if due is None or due > end:
            clock.current = end
            return
        clock.current = max(clock.current, due + timedelta(seconds=30))
        await minute_tick(deps)


async def sent_times(core: Core, user_id: int) -> list[datetime]:
    return [r.sent_at for r in await outreach_rows(core, user_id) if r.sent_at is not None]


async def test_a_due_checkin_is_composed_sent_and_recorded_once(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 2, 7, 0, tzinfo=UTC)
    delivery = recording(core)
    answer = drafts(scripted_llm, message="Good morning — how did you sleep?")
    alice = await add_person(core, tz=COPENHAGEN)
    deps = scheduler_deps(core)
    assert await next_checkin_at(core, alice) == datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

    clock.current = datetime(2026, 3, 2, 8, 0, 30, tzinfo=UTC)
    outcomes = await minute_tick(deps)
    assert outcomes["sent"] == 1
    assert [(r.chat_id, m.text) for r, m in delivery.sent] == [
        ("chat-alice", "Good morning — how did you sleep?")
    ]
    assert delivery.sent[0][1].private
    assert await statuses(core, alice) == [("checkin", "sent", None)]
    (row,) = await outreach_rows(core, alice)
    assert row.idempotency_key == f"checkin:{alice}:2026-03-02"
    assert row.sent_at == clock.now() and row.platform == "console" and row.text
    assert await next_checkin_at(core, alice) == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    assert "Never guilt-trip" in answer.prompts[0] and "At most one question" in answer.prompts[0]
    async with core.sessions() as db:
        stored = (await db.scalars(select(Message).where(Message.user_id == alice))).all()
    assert [(m.role, m.content) for m in stored] == [
        ("assistant", "Good morning — how did you sleep?")
    ]

    clock.advance(minutes=1)
    assert (await run_checkins(deps))["sent"] == 0
    assert len(delivery.sent) == 1


async def test_the_person_replying_continues_the_checkin_conversation(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 2, 8, 59, tzinfo=UTC)
    recording(core)
    drafts(scripted_llm, message="Morning! Big day today?")
    await add_person(core)
    clock.advance(minutes=1, seconds=5)
    await minute_tick(scheduler_deps(core))
    clock.advance(minutes=5)
    await say(core, "yes, the interview is at 2")
    turns = scripted_llm.chat_requests[-1].turns
    assert [(t.role, t.content) for t in turns][-2:] == [
        ("assistant", "Morning! Big day today?"),
        ("user", "yes, the interview is at 2"),
    ]


async def test_new_people_are_scheduled_by_the_tick(core: Core, clock: FakeClock) -> None:
    alice = await add_person(core, tz=NEW_YORK, schedule=False)
    assert await next_checkin_at(core, alice) is None
    await minute_tick(scheduler_deps(core))
    # Monday 2 March 2026, 09:00 UTC is 04:00 in New York: today, 09:00 EST.
    assert await next_checkin_at(core, alice) == datetime(2026, 3, 2, 14, 0, tzinfo=UTC)


async def test_checkins_stay_at_nine_local_across_dst_in_two_timezones(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 6, 12, 0, tzinfo=UTC)
    recording(core)
    drafts(scripted_llm)
    copenhagen = await add_person(core, "mette", tz=COPENHAGEN)
    new_york = await add_person(core, "joe", tz=NEW_YORK)
    deps = scheduler_deps(core, max_unanswered=100)
    await run_until(core, deps, clock, datetime(2026, 3, 31, 0, 0, tzinfo=UTC))

    times = {t.date(): t for t in await sent_times(core, copenhagen)}
    assert times[datetime(2026, 3, 28).date()].time() == time(8, 0, 30)  # 09:00 CET
    assert times[datetime(2026, 3, 29).date()].time() == time(7, 0, 30)  # 09:00 CEST
    assert times[datetime(2026, 3, 30).date()].time() == time(7, 0, 30)
    ny = {t.date(): t for t in await sent_times(core, new_york)}
    assert ny[datetime(2026, 3, 7).date()].time() == time(14, 0, 30)  # 09:00 EST
    assert ny[datetime(2026, 3, 8).date()].time() == time(13, 0, 30)  # 09:00 EDT
    assert len(ny) == len(await sent_times(core, new_york)) == 25  # one a day, 6-30 March


async def test_nonexistent_and_repeated_local_times_send_once(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    recording(core)
    drafts(scripted_llm)
    clock.current = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)
    gap = await add_person(core, "gap", tz=NEW_YORK, checkin=time(2, 30), quiet=None)
    clock.current = datetime(2026, 10, 31, 12, 0, tzinfo=UTC)
    fold = await add_person(core, "fold", tz=NEW_YORK, checkin=time(1, 30), quiet=None)
    deps = scheduler_deps(core, max_unanswered=100)
    clock.current = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)
    await run_until(core, deps, clock, datetime(2026, 3, 10, 0, 0, tzinfo=UTC))
    # 02:30 does not exist on 8 March: it is sent once, at 03:30 EDT.
    assert [t.replace(second=0) for t in await sent_times(core, gap)] == [
        datetime(2026, 3, 8, 7, 30, tzinfo=UTC),
        datetime(2026, 3, 9, 6, 30, tzinfo=UTC),
    ]
    await core.store.update_person(gap, paused=True, next_checkin_at=None)
    clock.current = datetime(2026, 10, 31, 12, 0, tzinfo=UTC)
    await run_until(core, deps, clock, datetime(2026, 11, 3, 0, 0, tzinfo=UTC))
    # 01:30 happens twice on 1 November: only the first one counts.
    assert [t.replace(second=0) for t in await sent_times(core, fold)] == [
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
        datetime(2026, 11, 2, 6, 30, tzinfo=UTC),
    ]


async def test_quiet_hours_across_midnight_skip_the_checkin(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    delivery = recording(core)
    drafts(scripted_llm)
    late = await add_person(core, "late", checkin=time(23, 30))
    early = await add_person(core, "early", checkin=time(7, 45))
    after = await add_person(core, "after", checkin=time(8, 15))
    short = await add_person(core, "short", checkin=time(1, 0), quiet=(time(20), time(2)))
    await run_until(core, scheduler_deps(core), clock, datetime(2026, 3, 3, 12, 0, tzinfo=UTC))
    assert await statuses(core, late) == [("checkin", "skipped", "quiet_hours")]
    assert await statuses(core, early) == [("checkin", "skipped", "quiet_hours")]
    assert await statuses(core, short) == [("checkin", "skipped", "quiet_hours")]
    assert await statuses(core, after) == [("checkin", "sent", None)]
    assert [r.platform_user_id for r, _ in delivery.sent] == ["after"]
    assert checkin_requests(scripted_llm) == 1  # the rules ran before any model call


async def test_pause_stops_checkins_and_resume_reschedules(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    delivery = recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=time(10))
    await say(core, "/pause")
    assert await next_checkin_at(core, alice) is None
    deps = scheduler_deps(core)
    clock.current = datetime(2026, 3, 3, 10, 0, 30, tzinfo=UTC)
    await minute_tick(deps)
    assert await outreach_rows(core, alice) == [] and delivery.sent == []
    await say(core, "/resume")
    assert await next_checkin_at(core, alice) == datetime(2026, 3, 4, 10, 0, tzinfo=UTC)
    clock.current = datetime(2026, 3, 4, 10, 0, 30, tzinfo=UTC)
    await minute_tick(deps)
    assert await statuses(core, alice) == [("checkin", "sent", None)]


async def test_a_paused_person_with_a_stale_schedule_is_skipped_as_paused(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=time(10))
    async with core.sessions.begin() as db:
        await db.execute(update(User).where(User.id == alice).values(paused=True))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert await statuses(core, alice) == [("checkin", "skipped", "paused")]
    assert await next_checkin_at(core, alice) is None
    assert checkin_requests(scripted_llm) == 0


async def test_unanswered_checkins_back_off_until_the_person_writes(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=time(10))
    deps = scheduler_deps(core)
    await run_until(core, deps, clock, datetime(2026, 3, 6, 12, 0, tzinfo=UTC))
    assert [s for _, s, _ in await statuses(core, alice)] == ["sent"] * 3 + ["skipped"] * 2
    assert (await statuses(core, alice))[-1] == ("checkin", "skipped", "unanswered")
    clock.current = datetime(2026, 3, 6, 15, 0, tzinfo=UTC)
    await say(core, "sorry, busy week!")
    await run_until(core, deps, clock, datetime(2026, 3, 7, 12, 0, tzinfo=UTC))
    assert (await statuses(core, alice))[-1] == ("checkin", "sent", None)


async def test_the_model_may_decide_to_stay_silent(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    delivery = recording(core)
    drafts(scripted_llm, send=False, message="")
    alice = await add_person(core, checkin=time(10))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert await statuses(core, alice) == [("checkin", "skipped", "nothing_to_say")]
    assert delivery.sent == [] and checkin_requests(scripted_llm) == 1


async def test_a_clingy_draft_is_never_sent(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    delivery = recording(core)
    drafts(scripted_llm, message="I miss you! You haven't written in days.")
    alice = await add_person(core, checkin=time(10))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert await statuses(core, alice) == [("checkin", "skipped", "clingy_draft")]
    assert delivery.sent == []


async def test_recent_activity_and_unreachable_people_are_skipped_before_the_model(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    recording(core)
    drafts(scripted_llm)
    chatty = await add_person(core, "chatty", checkin=time(10))
    gone = await add_person(core, "gone", checkin=time(10))
    await set_unreachable(core, gone)
    clock.current = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    await say(core, "morning!", "chatty")
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert await statuses(core, chatty) == [("checkin", "skipped", "recent_activity")]
    assert await statuses(core, gone) == [("checkin", "skipped", "unreachable")]
    assert checkin_requests(scripted_llm) == 0


async def test_a_failed_delivery_is_recorded_with_its_reason(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    core.outbound.register(RecordingDelivery(platform="console", fail_reason="blocked"))
    drafts(scripted_llm)
    alice = await add_person(core, checkin=time(10))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert await statuses(core, alice) == [("checkin", "failed", "blocked")]


async def test_the_model_being_down_is_retried_then_given_up(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    delivery = recording(core)
    drafts(scripted_llm)
    scripted_llm.down = True
    alice = await add_person(core, checkin=time(10))
    deps = scheduler_deps(core)
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    await minute_tick(deps)
    (row,) = await outreach_rows(core, alice)
    assert (row.status, row.attempts) == ("pending", 1)
    clock.advance(minutes=6)
    await minute_tick(deps)
    clock.advance(minutes=6)
    await minute_tick(deps)
    assert await statuses(core, alice) == [("checkin", "failed", "llm_unavailable")]
    assert delivery.sent == [] and checkin_requests(scripted_llm) == 3


async def test_a_second_claim_of_the_same_day_finds_the_key_taken(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    delivery = recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=time(10))
    deps = scheduler_deps(core)
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    await minute_tick(deps)
    # As if another process had read the old schedule: same person, same local day.
    await core.store.update_person(alice, checkin_time=time(11))
    clock.current = datetime(2026, 3, 2, 11, 0, 30, tzinfo=UTC)
    await minute_tick(deps)
    assert len(await outreach_rows(core, alice)) == 1 and len(delivery.sent) == 1


@pytest.fixture
async def second_process(database_url: str) -> AsyncIterator[AsyncEngine]:
    """Another process's connection pool to the same database."""
    engine = create_engine(database_url, pool_size=5)
    yield engine
    await engine.dispose()


def as_process(
    deps: SchedulerDeps, engine: AsyncEngine, delivery: RecordingDelivery
) -> SchedulerDeps:
    sessions = session_factory(engine)
    outbound = Outbound(sessions)
    outbound.register(delivery)
    return dataclasses.replace(
        deps,
        engine=engine,
        sessions=sessions,
        store=SqlConversationStore(sessions),
        outbound=outbound,
    )


async def test_two_scheduler_processes_send_each_checkin_exactly_once(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM, second_process: AsyncEngine
) -> None:
    drafts(scripted_llm)
    people = [await add_person(core, f"p{i}", checkin=time(10)) for i in range(40)]
    first_delivery, second_delivery = recording(core), RecordingDelivery()
    first = scheduler_deps(core, batch_size=7, concurrency=3)
    second = as_process(first, second_process, second_delivery)
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    await asyncio.gather(minute_tick(first), minute_tick(second), minute_tick(first))
    delivered = [r.user_id for r, _ in first_delivery.sent + second_delivery.sent]
    assert sorted(delivered) == sorted(people)
    rows = await outreach_rows(core)
    assert len(rows) == 40 and {r.status for r in rows} == {"sent"}
    async with core.sessions() as db:
        keys = await db.scalar(text("SELECT count(DISTINCT idempotency_key) FROM outreach"))
    assert keys == 40


class Crash(BaseException):
    """The process dies (power cut, OOM kill) right after the platform took the message."""


class CrashingDelivery(RecordingDelivery):
    async def send(self, recipient: Recipient, reply: Reply) -> str:
        await super().send(recipient, reply)
        raise Crash


async def test_a_crash_between_send_and_record_never_sends_twice(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    drafts(scripted_llm)
    crashing = CrashingDelivery()
    core.outbound.register(crashing)
    alice = await add_person(core, checkin=time(10))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    with pytest.raises(Crash):
        await minute_tick(scheduler_deps(core))
    assert await statuses(core, alice) == [("checkin", "sending", None)]

    # Restart: a new process, a working platform, the lease has run out.
    delivery = recording(core)
    restarted = scheduler_deps(core)
    clock.advance(seconds=5)
    await minute_tick(restarted)
    assert await statuses(core, alice) == [("checkin", "sending", None)]  # lease still held
    clock.advance(minutes=11)
    await minute_tick(restarted)
    assert await statuses(core, alice) == [("checkin", "unknown", "interrupted")]
    assert len(crashing.sent) == 1 and delivery.sent == []

    await run_until(core, restarted, clock, datetime(2026, 3, 3, 12, 0, tzinfo=UTC))
    assert [s for _, s, _ in await statuses(core, alice)] == ["unknown", "sent"]


async def test_catch_up_after_six_hours_down_sends_at_most_one_per_person(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 2, 3, 30, tzinfo=UTC)
    delivery = recording(core)
    drafts(scripted_llm)
    hours = (4, 5, 7, 8, 9)
    people = {h: await add_person(core, f"p{h}", checkin=time(h), quiet=None) for h in hours}
    deps = scheduler_deps(core)
    await minute_tick(deps)
    assert await outreach_rows(core) == []
    stale = await add_person(core, "stale", checkin=time(6), quiet=None)
    await core.store.update_person(stale, next_checkin_at=datetime(2026, 2, 27, 6, 0, tzinfo=UTC))

    clock.current = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)  # back after six hours
    await minute_tick(deps)
    await minute_tick(deps)
    for hour in (4, 5, 7):
        assert await statuses(core, people[hour]) == [("checkin", "skipped", "missed")]
    for hour in (8, 9):
        assert await statuses(core, people[hour]) == [("checkin", "sent", None)]
    assert await statuses(core, stale) == [("checkin", "skipped", "missed")]
    assert sorted(r.platform_user_id for r, _ in delivery.sent) == ["p8", "p9"]
    for user_id in [*people.values(), stale]:
        due = await next_checkin_at(core, user_id)
        assert due is not None and due.date() == datetime(2026, 3, 3).date()
