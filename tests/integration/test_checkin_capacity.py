"""Check-ins at cohort size: spread over the window, claimed by whichever process has free
slots (never more than its concurrency at once), each sent once; a backlog past the grace
is skipped and counted, never sent as a burst."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from datetime import UTC, datetime, time, timedelta

from bot.bootstrap import Core
from bot.llm import Completion, LLMRequest, ToolCall
from bot.llm_tools import LLMToolCaller
from scheduler.checkins import minute_tick, run_checkins
from scheduler.deps import SchedulerDeps
from tests.conftest import FakeClock
from tests.integration.test_scheduler_support import (
    add_person,
    recording,
    scheduler_deps,
    statuses,
)

NINE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class SlowModel:
    """Drafts a check-in after a pause, counting the calls running at once."""

    def __init__(self, pause: float) -> None:
        self.pause = pause
        self.running = 0
        self.most = 0

    async def complete(self, request: LLMRequest) -> Completion:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.pause)
        finally:
            self.running -= 1
        draft = {"send": True, "message": "Morning! How are you today?"}
        return Completion(
            text="", model="slow", tool_calls=(ToolCall("t", "decide_checkin", draft),)
        )


def with_model(deps: SchedulerDeps, model: SlowModel) -> SchedulerDeps:
    return dataclasses.replace(deps, llm=model, tool_caller=LLMToolCaller(model))  # type: ignore[arg-type]


async def test_a_popular_time_is_spread_over_the_window_and_each_is_sent_once(
    core: Core, clock: FakeClock
) -> None:
    clock.current = NINE - timedelta(hours=1)
    delivery = recording(core)
    people = [await add_person(core, f"p{i}", schedule=False) for i in range(30)]
    deps = with_model(scheduler_deps(core, spread=timedelta(minutes=20)), SlowModel(0))
    await minute_tick(deps)  # schedules everyone, inside 09:00-09:20
    sent_at: dict[str, datetime] = {}
    while clock.now() < NINE + timedelta(minutes=25):
        clock.advance(minutes=1)
        before = len(delivery.sent)
        await run_checkins(deps)
        for recipient, _ in delivery.sent[before:]:
            sent_at[recipient.chat_id] = clock.now()

    assert len(delivery.sent) == len(people) == len(sent_at)  # everyone, once
    minutes = {at.minute for at in sent_at.values()}
    assert len(minutes) >= 10  # spread, not one minute
    assert all(NINE < at <= NINE + timedelta(minutes=21) for at in sent_at.values())


async def test_each_process_claims_only_what_it_has_room_for(core: Core, clock: FakeClock) -> None:
    clock.current = NINE - timedelta(hours=1)
    delivery = recording(core)
    for i in range(24):
        await add_person(core, f"p{i}")
    clock.current = NINE + timedelta(minutes=1)
    models = [SlowModel(0.3), SlowModel(0.3)]
    processes = [with_model(scheduler_deps(core, concurrency=3), m) for m in models]

    outcomes = await asyncio.gather(*(run_checkins(deps) for deps in processes))

    assert sum(o["sent"] for o in outcomes) == 24
    assert all(o["sent"] > 0 for o in outcomes)  # both took a share
    assert all(m.most <= 3 for m in models)  # never more than its slots at once
    assert max(m.most for m in models) == 3  # and its slots are used (reads vary in time)
    assert Counter(r.chat_id for r, _ in delivery.sent).most_common(1)[0][1] == 1


async def test_a_backlog_past_the_grace_is_skipped_and_counted_never_sent(
    core: Core, clock: FakeClock
) -> None:
    clock.current = NINE - timedelta(hours=1)
    delivery = recording(core)
    late = [await add_person(core, f"late{i}") for i in range(5)]
    on_time = await add_person(core, "on-time", checkin=time(11))
    clock.current = NINE + timedelta(hours=2, minutes=30)  # the 09:00 cohort is past grace
    deps = with_model(scheduler_deps(core, grace=timedelta(hours=2)), SlowModel(0))

    outcomes = await run_checkins(deps)

    assert outcomes["claimed"] == 6
    assert [r.chat_id for r, _ in delivery.sent] == ["chat-on-time"]
    for person in late:
        assert await statuses(core, person) == [("checkin", "skipped", "missed")]
    assert await statuses(core, on_time) == [("checkin", "sent", None)]
