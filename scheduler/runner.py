"""APScheduler wiring: a few global jobs in the application's event loop.

Per-person schedules live in PostgreSQL (`next_checkin_at`, `next_patrol_at`), not in
APScheduler's memory, so the jobs are the same in every process and any number of
processes can run them: check-ins are claimed with SKIP LOCKED, the nightly work runs
under an advisory lock. Each job runs at once on start (the catch-up after downtime),
then on its interval; a run that is still going is never started twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot import metrics
from bot.bootstrap import Core
from bot.health import SCHEDULER, Health
from scheduler.checkins import minute_tick
from scheduler.deps import SchedulerConfig, SchedulerDeps, deps_from
from scheduler.patrol import run_nightly

log = structlog.get_logger(__name__)

STOP_TIMEOUT = 30.0


class SchedulerService:
    """The scheduler's jobs on an `AsyncIOScheduler`; `start` in a running loop, `stop`
    waits for running jobs (up to a timeout) before shutting down."""

    def __init__(
        self, deps: SchedulerDeps, *, sweep: bool = True, health: Health | None = None
    ) -> None:
        self.deps = deps
        self._health = health
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._running: set[asyncio.Task[object]] = set()
        self._sweep = sweep

    def _job(
        self, name: str, work: Callable[[], Awaitable[object]]
    ) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            task = asyncio.current_task()
            if task is not None:
                self._running.add(task)
            try:
                with metrics.observe_job(name):
                    await work()
            except Exception:
                log.exception("scheduler.job_failed", job=name)
            else:
                if self._health is not None:
                    self._health.beat(SCHEDULER)
            finally:
                if task is not None:
                    self._running.discard(task)

        return run

    def _add(
        self, name: str, seconds: float, work: Callable[[], Awaitable[object]], delay: float
    ) -> None:
        self._scheduler.add_job(
            self._job(name, work),
            "interval",
            seconds=seconds,
            id=name,
            name=name,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=self.deps.config.misfire_grace_seconds,
            next_run_time=datetime.now(UTC) + timedelta(seconds=delay),
        )

    def start(self) -> None:
        """Add the jobs and start; each runs at once (staggered), then on its interval."""
        config, deps = self.deps.config, self.deps
        self._add("checkins", config.tick_seconds, lambda: minute_tick(deps), 0)
        self._add("nightly", config.nightly_seconds, lambda: run_nightly(deps), 1)
        importer = deps.importer
        if importer is not None and config.llm_steps:
            self._add("imports", config.import_seconds, importer.tick, 3)
        if self._sweep:
            self._add(
                "sweep",
                config.sweep_seconds,
                lambda: deps.memory.sweep(idle_gap=config.idle_gap),
                2,
            )
        self._scheduler.start()
        log.info("scheduler.started", jobs=[job.id for job in self._scheduler.get_jobs()])

    async def stop(self, grace_seconds: float = STOP_TIMEOUT) -> None:
        """Start nothing new, let running jobs finish (cancel them after `grace_seconds`)."""
        if not self._scheduler.running:
            return
        self._scheduler.pause()
        running = list(self._running)
        if running:
            _done, pending = await asyncio.wait(running, timeout=grace_seconds)
            for task in pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*pending, return_exceptions=True)
        self._scheduler.shutdown(wait=False)
        await asyncio.sleep(0)  # the shutdown runs on the loop
        log.info("scheduler.stopped")


async def run_scheduler(
    core: Core, stop: asyncio.Event, *, config: SchedulerConfig | None = None, sweep: bool = True
) -> None:
    """Run the scheduler's jobs for `core` until `stop` is set (the CLI's entry point).

    `sweep=False` when something else already closes idle sessions every minute.
    """
    service = SchedulerService(deps_from(core, config), sweep=sweep, health=core.health)
    service.start()
    try:
        await stop.wait()
    finally:
        await service.stop()
