"""Health of the running parts: adapters report connected or not, the scheduler beats,
and `check_health` adds a database round trip; `/healthz` serves the report."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from bot import metrics
from memory.store.database import Engine, ping

log = structlog.get_logger(__name__)

BEAT_TIMEOUT_SECONDS = 180.0
DATABASE_TIMEOUT_SECONDS = 2.0
SCHEDULER = "scheduler"


@dataclass(frozen=True, slots=True)
class ComponentState:
    """What a component last reported, and when (monotonic seconds)."""

    ok: bool
    detail: str
    at: float


class Health:
    """Component states set by adapters (`set`) and heartbeats (`beat`) of loops."""

    def __init__(
        self,
        *,
        beat_timeout: float = BEAT_TIMEOUT_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._beat_timeout = beat_timeout
        self._monotonic = monotonic
        self._states: dict[str, ComponentState] = {}
        self._beats: dict[str, float] = {}

    def set(self, component: str, ok: bool, detail: str = "") -> None:
        """Record a component's state, e.g. `set("telegram", True, "connected")`."""
        self._states[component] = ComponentState(ok, detail, self._monotonic())

    def beat(self, component: str = SCHEDULER) -> None:
        """A loop is alive; without a beat for `beat_timeout` seconds it counts as stalled."""
        self._beats[component] = self._monotonic()

    def states(self) -> dict[str, ComponentState]:
        """Every component that reported a state."""
        return dict(self._states)

    def beat_status(self, component: str = SCHEDULER) -> tuple[bool, str]:
        """(healthy, 'alive' | 'stalled (no beat for Ns)' | 'not running')."""
        last = self._beats.get(component)
        if last is None:
            return True, "not running"
        age = self._monotonic() - last
        if age > self._beat_timeout:
            return False, f"stalled (no beat for {age:.0f}s)"
        return True, "alive"


@dataclass(frozen=True, slots=True)
class HealthReport:
    """The answer of `/healthz`."""

    database: str
    adapters: dict[str, str] = field(default_factory=dict)
    scheduler: str = "not running"
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether everything that runs is healthy."""
        return not self.problems

    def as_json(self) -> dict[str, object]:
        """The report as the JSON body of `/healthz`."""
        body: dict[str, object] = {
            "status": "ok" if self.ok else "unhealthy",
            "database": self.database,
            "adapters": dict(self.adapters),
            "scheduler": self.scheduler,
        }
        if self.problems:
            body["problems"] = list(self.problems)
        return body


async def ping_database(engine: Engine, wait_seconds: float = DATABASE_TIMEOUT_SECONDS) -> str:
    """'ok' after a `SELECT 1` round trip, else why not (error type, never its text)."""
    try:
        async with asyncio.timeout(wait_seconds):
            await ping(engine)
    except TimeoutError:
        return "timeout"
    except Exception as exc:  # any driver or pool error means unreachable
        return f"unreachable ({type(exc).__name__})"
    return "ok"


async def check_health(
    engine: Engine, health: Health, *, wait_seconds: float = DATABASE_TIMEOUT_SECONDS
) -> HealthReport:
    """Database, adapters and scheduler, with the health gauges updated to match."""
    database = await ping_database(engine, wait_seconds)
    problems = [] if database == "ok" else [f"database {database}"]
    adapters = {}
    for name, state in sorted(health.states().items()):
        adapters[name] = state.detail or ("connected" if state.ok else "disconnected")
        if not state.ok:
            problems.append(f"{name} {adapters[name]}")
        metrics.record_component(name, state.ok)
    scheduler_ok, scheduler = health.beat_status(SCHEDULER)
    if not scheduler_ok:
        problems.append(f"scheduler {scheduler}")
    metrics.record_component("database", database == "ok")
    metrics.record_component(SCHEDULER, scheduler_ok and scheduler != "not running")
    if problems:
        log.warning("health.unhealthy", problems=problems)
    return HealthReport(database, adapters, scheduler, tuple(problems))
