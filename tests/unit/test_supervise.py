"""The adapter supervisor on virtual time: restarts with backoff, unhealthy meanwhile, a
crash limit within a window, a stop that ends the wait, and a configuration error that is
never restarted."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import cast

import pytest
import structlog.testing

from adapters.supervise import RestartPolicy, supervise
from bot.domain import Recipient, Reply
from bot.errors import ConfigurationError
from bot.health import Health
from bot.outbound import Outbound
from memory.store.database import Database
from tests.support.virtual_time import run_virtual

POLICY = RestartPolicy(backoff=(1.0, 2.0, 5.0), crash_limit=4, window_seconds=60.0)


class Flaky:
    """An adapter that fails its first `failures` runs, then runs until `stop`."""

    def __init__(self, failures: int, stop: asyncio.Event, health: Health) -> None:
        self.failures = failures
        self.stop = stop
        self.health = health
        self.started_at: list[float] = []
        self.health_at_start: list[tuple[bool, str]] = []

    async def run(self) -> None:
        self.started_at.append(asyncio.get_running_loop().time())
        state = self.health.states().get("discord")
        if state is not None:
            self.health_at_start.append((state.ok, state.detail))
        if len(self.started_at) <= self.failures:
            raise RuntimeError("parse failure")
        self.health.set("discord", True, "connected")
        await self.stop.wait()


def test_a_failing_adapter_restarts_with_backoff_and_is_unhealthy_meanwhile() -> None:
    async def scenario() -> tuple[Flaky, list[dict[str, object]], Health]:
        stop, health = asyncio.Event(), Health(monotonic=asyncio.get_running_loop().time)
        flaky = Flaky(3, stop, health)
        with structlog.testing.capture_logs() as logs:
            task = asyncio.create_task(
                supervise("discord", flaky.run, health=health, stop=stop, policy=POLICY)
            )
            await asyncio.sleep(100)
            stop.set()
            await task
        return flaky, logs, health

    flaky, logs, health = run_virtual(scenario())
    assert flaky.started_at == [0.0, 1.0, 3.0, 8.0]  # waits of 1, 2 and 5 seconds
    assert flaky.health_at_start == [
        (False, "restarting after a crash (1 of 4)"),
        (False, "restarting after a crash (2 of 4)"),
        (False, "restarting after a crash (3 of 4)"),
    ]
    assert health.states()["discord"].ok
    crashed = [e for e in logs if e["event"] == "adapter.crashed"]
    assert [(e["log_level"], e["adapter"], e["error"], e["crashes"]) for e in crashed] == [
        ("error", "discord", "RuntimeError", n) for n in (1, 2, 3)
    ]


def test_past_the_crash_limit_it_stays_down_and_unhealthy_until_stopped() -> None:
    async def scenario() -> tuple[Flaky, list[dict[str, object]], Health, float]:
        loop = asyncio.get_running_loop()
        stop, health = asyncio.Event(), Health(monotonic=loop.time)
        flaky = Flaky(1000, stop, health)
        with structlog.testing.capture_logs() as logs:
            task = asyncio.create_task(
                supervise("discord", flaky.run, health=health, stop=stop, policy=POLICY)
            )
            await asyncio.sleep(500)
            assert not task.done()  # it waits for the stop, never ending the task group
            stop.set()
            await task
        return flaky, logs, health, loop.time()

    flaky, logs, health, _ = run_virtual(scenario())
    assert flaky.started_at == [0.0, 1.0, 3.0, 8.0]
    state = health.states()["discord"]
    assert (state.ok, state.detail) == (False, "stopped after 4 crashes")
    assert [e["crashes"] for e in logs if e["event"] == "adapter.gave_up"] == [4]


def test_crashes_outside_the_window_do_not_count_toward_the_limit() -> None:
    async def scenario() -> list[float]:
        stop, health = asyncio.Event(), Health(monotonic=asyncio.get_running_loop().time)
        starts: list[float] = []

        async def crashes_after_a_while() -> None:
            starts.append(asyncio.get_running_loop().time())
            if len(starts) <= 6:
                await asyncio.sleep(100)  # longer than the window between crashes
                raise RuntimeError("lost the connection")
            await stop.wait()

        task = asyncio.create_task(
            supervise("telegram", crashes_after_a_while, health=health, stop=stop, policy=POLICY)
        )
        await asyncio.sleep(1000)
        assert not task.done()
        stop.set()
        await task
        return starts

    starts = run_virtual(scenario())
    assert len(starts) == 7  # six crashes, each alone in its window: restarted every time
    assert [round(b - a) for a, b in itertools.pairwise(starts)] == [101] * 6


def test_a_stop_during_the_backoff_ends_it_and_a_configuration_error_is_not_restarted() -> None:
    async def scenario() -> tuple[list[float], float]:
        loop = asyncio.get_running_loop()
        stop, health = asyncio.Event(), Health(monotonic=loop.time)
        flaky = Flaky(1000, stop, health)
        task = asyncio.create_task(
            supervise("discord", flaky.run, health=health, stop=stop, policy=POLICY)
        )
        await asyncio.sleep(2)  # within the second wait (2 s from t=1)
        stop.set()
        await task
        return flaky.started_at, loop.time()

    started, ended = run_virtual(scenario())
    assert started == [0.0, 1.0] and ended == 2.0

    async def misconfigured() -> None:
        raise ConfigurationError("DISCORD_BOT_TOKEN was rejected by Discord")

    async def configuration() -> None:
        await supervise(
            "discord", misconfigured, health=Health(), stop=asyncio.Event(), policy=POLICY
        )

    with pytest.raises(ConfigurationError, match="rejected"):
        run_virtual(configuration())


def test_an_adapter_given_up_before_it_connected_holds_up_no_other_platforms_messages() -> None:
    """The scheduler waits for every platform's delivery port before its catch-up; a
    platform whose adapter reaches the crash limit before it ever connected is given up,
    so the other platform's check-ins still start."""

    @dataclass
    class Port:
        platform: str

        async def send(self, recipient: Recipient, reply: Reply) -> str:
            return "1"

    async def scenario() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        stop, health = asyncio.Event(), Health(monotonic=loop.time)
        outbound = Outbound(cast(Database, None))
        flaky = Flaky(1000, stop, health)  # never connects
        task = asyncio.create_task(
            supervise(
                "telegram",
                flaky.run,
                health=health,
                stop=stop,
                policy=POLICY,
                on_give_up=lambda: outbound.give_up("telegram"),
            )
        )
        outbound.register(Port("discord"))
        waiting = asyncio.create_task(outbound.wait_for(["telegram", "discord"]))
        await asyncio.sleep(5)
        assert not waiting.done()  # telegram is still restarting: worth waiting for
        await waiting
        started = loop.time()
        outbound.register(Port("telegram"))  # registering (a platform that did connect) clears it
        await outbound.wait_for(["telegram", "discord"])
        stop.set()
        await task
        return started, loop.time()

    started, ended = run_virtual(scenario())
    assert started == 8.0  # the fourth crash, at 8 s, reached the limit
    assert ended == 8.0
