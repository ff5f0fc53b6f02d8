"""The APScheduler wiring: the jobs really run in the event loop, at once on start (the
catch-up), and stop cleanly."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time

import pytest
import structlog.testing
from sqlalchemy import text

from bot.bootstrap import Core
from scheduler.deps import SchedulerConfig
from scheduler.runner import SchedulerService, run_scheduler
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.integration.test_scheduler_support import (
    add_person,
    drafts,
    recording,
    scheduler_deps,
    statuses,
)


async def wait_for(condition: Callable[[], Awaitable[bool]], seconds: float = 5.0) -> None:
    """Poll `condition` (the jobs run on APScheduler's real timers) until it holds."""
    for _ in range(int(seconds / 0.02)):
        if await condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the scheduler did not get there in time")


async def test_the_scheduler_runs_the_jobs_in_the_event_loop(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    delivery = recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=time(10))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    service = SchedulerService(scheduler_deps(core, tick_seconds=0.1, nightly_seconds=0.1))
    service.start()
    try:
        await wait_for(lambda: _sent(core, alice))

        async def patrol_scheduled() -> bool:
            async with core.sessions() as db:
                found = await db.scalar(
                    text("SELECT next_patrol_at FROM users WHERE id = :id"), {"id": alice}
                )
            return found is not None

        await wait_for(patrol_scheduled)
    finally:
        await service.stop()
    assert len(delivery.sent) == 1


async def _sent(core: Core, user_id: int) -> bool:
    return await statuses(core, user_id) == [("checkin", "sent", None)]


async def test_run_scheduler_stops_when_told(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=time(10))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    stop = asyncio.Event()
    config = SchedulerConfig(tick_seconds=0.1, nightly_seconds=60, sweep_seconds=60)
    running = asyncio.create_task(run_scheduler(core, stop, config=config))
    await wait_for(lambda: _sent(core, alice))
    stop.set()
    async with asyncio.timeout(5):
        await running


async def test_a_failing_job_is_logged_and_retried_while_the_others_run(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    delivery = recording(core)
    drafts(scripted_llm)
    alice = await add_person(core, checkin=time(10))
    clock.current = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    failures = 0

    async def broken_nightly(_deps: object) -> None:
        nonlocal failures
        failures += 1
        raise RuntimeError("the nightly work broke")

    monkeypatch.setattr("scheduler.runner.run_nightly", broken_nightly)
    service = SchedulerService(scheduler_deps(core, tick_seconds=0.1, nightly_seconds=0.1))
    with structlog.testing.capture_logs() as logs:
        service.start()
        try:
            await wait_for(lambda: _sent(core, alice))

            async def retried() -> bool:
                return failures >= 3

            await wait_for(retried)
        finally:
            await service.stop()
    assert len(delivery.sent) == 1  # check-ins went out while the nightly job kept failing
    failed = [e for e in logs if e["event"] == "scheduler.job_failed"]
    assert {(e["log_level"], e["job"]) for e in failed} == {("error", "nightly")}
    assert len(failed) >= 3 and all(e.get("exc_info") for e in failed)  # with the traceback
