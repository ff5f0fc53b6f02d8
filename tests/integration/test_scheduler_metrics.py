"""The scheduler's metrics on real PostgreSQL, through its own jobs: every outbox row the
minute tick writes or settles reaches `companion_outreach_total` with its kind, status
and reason (check-ins skipped as missed when claimed, follow-ups folded into a check-in,
rows interrupted mid-send), and the nightly patrol times each step it runs."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, time, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from bot import metrics
from bot.bootstrap import Core
from bot.domain import Recipient, Reply
from scheduler.checkins import minute_tick
from scheduler.patrol import run_nightly
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.delivery import RecordingDelivery
from tests.integration.test_scheduler_support import (
    add_person,
    drafts,
    recording,
    remember_event,
    scheduler_deps,
    statuses,
)

Tally = Counter[tuple[str, str, str]]


def outreach_counts() -> Tally:
    """`companion_outreach_total` by (kind, status, reason), read from the exposition."""
    counts: Tally = Counter()
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == "companion_outreach_total":
                labels = sample.labels
                counts[(labels["kind"], labels["status"], labels["reason"])] = int(sample.value)
    return counts


def counted_since(before: Tally) -> Tally:
    """What the outreach metric counted since `before`."""
    return +(outreach_counts() - before)


async def rows_by_fate(core: Core) -> Tally:
    """Every outbox row by (kind, status, reason) as the metric labels it."""
    rows = await statuses(core)
    return Counter((kind, status, reason or "none") for kind, status, reason in rows)


async def test_every_row_of_a_tick_is_counted_missed_and_folded_ones_included(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    recording(core)
    drafts(scripted_llm, message="Morning! How did the dentist and the party go?")
    alice = await add_person(core, "alice", checkin=time(9), quiet=None)
    await remember_event(core, alice, "Dentist appointment", datetime(2026, 3, 2, 6, tzinfo=UTC))
    await remember_event(core, alice, "Sister's party", datetime(2026, 3, 1, tzinfo=UTC))
    bob = await add_person(core, "bob", checkin=time(6), quiet=None)
    await core.store.update_person(bob, next_checkin_at=datetime(2026, 2, 27, 6, tzinfo=UTC))
    before = outreach_counts()

    clock.current = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))

    expected = {
        ("checkin", "sent", "none"): 1,
        ("followup", "sent", "none"): 2,  # folded into alice's check-in
        ("checkin", "skipped", "missed"): 1,  # bob's, skipped when it was claimed
    }
    assert await rows_by_fate(core) == expected
    assert counted_since(before) == expected


class Crash(BaseException):
    """The process dies (not an error the dispatcher would catch)."""


class CrashingDelivery(RecordingDelivery):
    """Sends, then the process dies before the send is recorded."""

    async def send(self, recipient: Recipient, reply: Reply) -> str:
        await super().send(recipient, reply)
        raise Crash


async def test_rows_interrupted_mid_send_are_counted_as_unknown_once(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    drafts(scripted_llm)
    core.outbound.register(CrashingDelivery())
    carol = await add_person(core, "carol", checkin=time(10), quiet=None)
    await remember_event(core, carol, "Job interview", datetime(2026, 3, 2, 7, tzinfo=UTC))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    before = outreach_counts()
    with pytest.raises(Crash):
        await minute_tick(scheduler_deps(core))
    assert counted_since(before) == {}  # nothing settled yet: both rows are 'sending'

    recording(core)
    restarted = scheduler_deps(core)
    clock.advance(minutes=11)  # the lease has run out
    await minute_tick(restarted)
    await minute_tick(restarted)
    expected = {("checkin", "unknown", "interrupted"): 1, ("followup", "unknown", "interrupted"): 1}
    assert await rows_by_fate(core) == expected
    assert counted_since(before) == expected


def step_runs() -> Counter[str]:
    """How many patrol runs each step's histogram has observed."""
    runs: Counter[str] = Counter()
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == "companion_patrol_step_duration_seconds_count":
                runs[sample.labels["step"]] = int(sample.value)
    return runs


async def test_the_nightly_patrol_times_each_step_it_runs(core: Core, clock: FakeClock) -> None:
    clock.current = datetime(2026, 3, 2, 2, 30, tzinfo=UTC)  # 03:30 in Copenhagen
    alice = await add_person(core, tz="Europe/Copenhagen")
    async with core.sessions.begin() as db:  # their night has come
        await db.execute(
            text("UPDATE users SET next_patrol_at = :due WHERE id = :id"),
            {"due": clock.now() - timedelta(minutes=30), "id": alice},
        )
    before = step_runs()
    report = await run_nightly(scheduler_deps(core, llm_steps=False))
    assert report is not None and report.people == 1
    assert +(step_runs() - before) == {"mechanical": 1, "merge": 1, "promote": 1, "purge": 1}

    clock.advance(days=1)
    before = step_runs()
    await run_nightly(scheduler_deps(core))
    assert +(step_runs() - before) == {
        step: 1
        for step in ("mechanical", "extract", "merge", "promote", "summaries", "diary", "purge")
    }
