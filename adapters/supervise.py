"""One platform's failure never takes the others down: each adapter runs under a
supervisor that restarts it with backoff when it fails, up to a crash limit, and shows it
unhealthy in `/healthz` meanwhile, while the other platform, the scheduler and the ops
endpoint carry on in the same task group.

A `ConfigurationError` (a rejected token, a refused intent) is not restarted: a restart
cannot fix a setting, so it still ends `companion run` with its one-line message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from bot.errors import ConfigurationError
from bot.health import Health

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """How an adapter that failed is restarted: after `backoff[n]` seconds for its n-th
    crash in a row (the last value repeats), and not again once `crash_limit` crashes
    fell within `window_seconds` (then it stays down, unhealthy, until the process stops)."""

    backoff: Sequence[float] = (1.0, 2.0, 5.0, 10.0, 30.0)
    crash_limit: int = 5
    window_seconds: float = 600.0

    @property
    def longest_wait(self) -> float:
        """The longest pause before a restart: the bound on how long a crashed adapter
        stays silent while it has restarts left (plus its own start-up)."""
        return max(self.backoff)


DEFAULT_POLICY = RestartPolicy()


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    *,
    health: Health,
    stop: asyncio.Event,
    policy: RestartPolicy = DEFAULT_POLICY,
    on_give_up: Callable[[], None] | None = None,
) -> None:
    """Run `run()` (one adapter, until `stop`) and restart it when it fails.

    Returns when `run` returns (it was stopped) or `stop` is set while waiting to
    restart; never raises for the adapter's failure, only for a `ConfigurationError`.
    `on_give_up` is called once the crash limit is reached (the adapter stays down).
    """
    loop = asyncio.get_running_loop()
    crashes: deque[float] = deque()
    while True:
        try:
            await run()
            return
        except ConfigurationError:
            raise
        except Exception as exc:
            now = loop.time()
            crashes.append(now)
            while crashes and now - crashes[0] > policy.window_seconds:
                crashes.popleft()
            log.exception(
                "adapter.crashed",
                adapter=name,
                error=type(exc).__name__,
                crashes=len(crashes),
                crash_limit=policy.crash_limit,
            )
        if stop.is_set():
            return
        if len(crashes) >= policy.crash_limit:
            health.set(name, False, f"stopped after {len(crashes)} crashes")
            log.error("adapter.gave_up", adapter=name, crashes=len(crashes))
            if on_give_up is not None:
                on_give_up()
            await stop.wait()
            return
        delay = policy.backoff[min(len(crashes), len(policy.backoff)) - 1]
        health.set(
            name, False, f"restarting after a crash ({len(crashes)} of {policy.crash_limit})"
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
        if stop.is_set():
            return
        log.info("adapter.restarting", adapter=name, crashes=len(crashes), waited=delay)
