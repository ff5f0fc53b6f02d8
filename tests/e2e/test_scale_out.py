"""Scale-out under faults: three real `companion run` processes on one database, Telegram in
webhook mode behind a round-robin load balancer (so one person's quick messages land on
different processes), people chatting and check-ins falling due, while the test SIGKILLs
a random process twenty times and starts it again.

The run's counts and its duration are printed (timing is reported, not asserted: on a
quiet machine the run takes about a minute, mostly the processes' starts). Then: no
inbound message lost, none answered twice, no check-in sent twice, and every
person answered in order (each reply answers only messages newer than the last reply's).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from datetime import time as clock_time
from pathlib import Path
from random import Random

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.conversations import SqlConversationStore
from memory.store.tables import Message, Outreach
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.companion_process import RunningCompanion, companion_env
from tests.support.crash_harness import CHECKIN, Chatter, CrashModel, replies_by_token

SEED = 20261126
PROCESSES = 3
KILLS = 20
CHATTERS = tuple(range(9101, 9107))
CHECKIN_PEOPLE = tuple(range(9201, 9211))
SECRET = "scale-out-secret"
TURN_LEASE = 3.0
FINAL = ("sent", "skipped", "failed", "unknown")
NUMBER = re.compile(r"#p\d+-(\d+)")

Db = async_sessionmaker[AsyncSession]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RoundRobin:
    """A load balancer: each webhook call to the next process; a process that does not
    answer (killed, still starting) is skipped for the next one, as a balancer's health
    checks would; when none answers, 502 and Telegram delivers again."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.port = free_port()
        self.forwarded: Counter[int] = Counter()
        self._next = 0
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> RoundRobin:
        app = web.Application()
        app.router.add_post("/hook", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._client is not None and self._runner is not None
        await self._client.close()
        await self._runner.cleanup()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._client is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        for _ in self.ports:
            port = self.ports[self._next % len(self.ports)]
            self._next += 1
            try:
                async with self._client.post(
                    f"http://127.0.0.1:{port}/hook", data=body, headers=headers
                ) as response:
                    if response.status == 200:
                        self.forwarded[port] += 1
                    return web.Response(status=response.status)
            except (aiohttp.ClientError, TimeoutError):
                continue
        return web.Response(status=502)


class Fleet:
    """Three `companion run` processes, each on its own webhook port."""

    def __init__(self, env: dict[str, str], ports: list[int], cwd: Path) -> None:
        self.env, self.ports, self.cwd = env, ports, cwd
        self.running: dict[int, RunningCompanion] = {}
        self.logs: list[str] = []

    async def start(self, index: int) -> None:
        env = self.env | {"COMPANION_TELEGRAM_WEBHOOK_PORT": str(self.ports[index])}
        self.running[index] = await RunningCompanion.start("run", env=env, cwd=self.cwd)

    async def kill(self, index: int) -> None:
        process = self.running.pop(index)
        await process.kill()
        self.logs.append(process.stderr)

    async def stop_all(self) -> list[int]:
        codes = []
        for index in list(self.running):
            process = self.running.pop(index)
            codes.append(await process.terminate(within=60))
            self.logs.append(process.stderr)
        return codes

    def errors(self) -> list[str]:
        return [
            line[:300]
            for log in self.logs + [p.stderr for p in self.running.values()]
            for line in log.splitlines()
            if '"level": "error"' in line or "Traceback" in line
        ]


async def add_checkin_people(db: Db, telegram: FakeTelegramAPI, first_due: datetime) -> None:
    """People who never wrote, whose check-ins fall due during the kills."""
    store = SqlConversationStore(db)
    for n, person in enumerate(CHECKIN_PEOPLE):
        telegram.start_chat(person)
        found = await store.ensure_person(
            platform="telegram",
            platform_user_id=str(person),
            chat_id=str(person),
            display_name=f"Checkin {n}",
        )
        await store.update_person(
            found.id,
            timezone="UTC",
            checkin_time=clock_time(9),
            quiet_start=None,
            quiet_end=None,
            next_checkin_at=first_due + timedelta(seconds=4) * n,
        )


@contextlib.asynccontextmanager
async def fleet_of(env: dict[str, str], ports: list[int], cwd: Path) -> AsyncIterator[Fleet]:
    fleet = Fleet(env, ports, cwd)
    try:
        yield fleet
    finally:
        for process in fleet.running.values():
            await process.kill()


async def settle(db: Db, telegram: FakeTelegramAPI, model: CrashModel, within: float) -> None:
    """Until nothing waits at Telegram or the model and every message is answered."""
    deadline = time.monotonic() + within
    calm = 0
    while calm < 3 and time.monotonic() < deadline:
        quiet = not telegram.pending_updates and not +model.in_flight
        calm = calm + 1 if quiet and await unanswered(db) == 0 else 0
        await asyncio.sleep(0.3)


async def unanswered(db: Db) -> int:
    async with db() as s:
        found = await s.scalar(
            select(func.count()).where(Message.role == "user", Message.status != "answered")
        )
    return int(found or 0)


@pytest.mark.timeout(420)  # about 1 minute on a quiet machine; a guard against hangs
async def test_three_processes_killed_twenty_times_lose_nothing_and_answer_once_in_order(
    database_url: str, db: Db, tmp_path: Path
) -> None:
    plan = Random(SEED)
    model = CrashModel(Random(SEED + 1), latency=(0.05, 0.3))
    ports = [free_port() for _ in range(PROCESSES)]
    started = time.monotonic()

    def mark(what: str) -> None:
        print(f"{time.monotonic() - started:6.1f} s  {what}", flush=True)

    async with (
        FakeAnthropicAPI(responder=model) as api,
        FakeTelegramAPI() as telegram,
        RoundRobin(ports) as balancer,
    ):
        env = companion_env(
            data_dir=tmp_path,
            database_url=database_url,
            anthropic=api,
            telegram=telegram,
            COMPANION_TELEGRAM_MODE="webhook",
            COMPANION_TELEGRAM_WEBHOOK_URL=f"http://127.0.0.1:{balancer.port}/hook",
            COMPANION_TELEGRAM_WEBHOOK_SECRET=SECRET,
            COMPANION_BURST_WINDOW_SECONDS="0.3",
            COMPANION_TURN_LEASE_SECONDS=str(TURN_LEASE),
            COMPANION_RATE_LIMIT_PER_MINUTE="6000",
            COMPANION_CHECKIN_SPREAD_MINUTES="0",
            COMPANION_LLM_MAX_RETRIES="1",
            COMPANION_LLM_TIMEOUT_SECONDS="5",
        )
        first_due = datetime.now(UTC) + timedelta(seconds=15)
        await add_checkin_people(db, telegram, first_due)
        async with fleet_of(env, ports, tmp_path) as fleet:
            for index in range(PROCESSES):
                await fleet.start(index)
            for process in fleet.running.values():
                await process.log("telegram.started", within=150)
            mark("all started")
            chatter = Chatter(telegram, Random(SEED + 2), CHATTERS)
            traffic = asyncio.create_task(chatter.run())
            try:
                for _ in range(KILLS):
                    await asyncio.sleep(plan.uniform(1.0, 2.5))
                    victim = plan.randrange(PROCESSES)
                    await fleet.kill(victim)
                    await asyncio.sleep(plan.uniform(0, 0.5))
                    await fleet.start(victim)
                    mark(f"killed and restarted {victim}")
            finally:
                chatter.running = False
                await traffic
            for process in fleet.running.values():
                await process.log("telegram.started", within=150)
            last_due = first_due + timedelta(seconds=4) * (len(CHECKIN_PEOPLE) - 1)
            await asyncio.sleep(max(0.0, (last_due - datetime.now(UTC)).total_seconds()))
            mark("kills done")
            await chatter.last_words(within=10)
            mark("last words")
            await settle(db, telegram, model, within=30)
            mark("settled")
            exits = await fleet.stop_all()
            mark("stopped")
        errors = fleet.errors()
    elapsed = time.monotonic() - started

    async with db() as s:
        rows = (await s.scalars(select(Message).where(Message.role == "user"))).all()
        outreach = (await s.scalars(select(Outreach))).all()
    stored = Counter((int(m.chat_id or 0), int(m.platform_message_id or 0)) for m in rows)
    lost = [token for key, token in chatter.pushed.items() if key not in stored]
    replies = replies_by_token(telegram, CHATTERS)
    answered_twice = sorted(token for (_, token), n in replies.items() if n > 1)
    never_answered = [m.content for m in rows if m.status != "answered"]
    out_of_order = [person for person in CHATTERS if not in_order(telegram, person)]
    checkins = {p: sum(m.text == CHECKIN for m in telegram.sent[p]) for p in CHECKIN_PEOPLE}
    report = (
        f"{len(chatter.pushed)} messages, {sum(replies.values())} replies, "
        f"{sum(checkins.values())} check-ins delivered, "
        f"rows {Counter(r.status for r in outreach)}, "
        f"webhooks per process {dict(balancer.forwarded)}, {elapsed:.0f} s"
    )
    print(f"\nscale-out: {report}")

    assert lost == [], report
    assert sorted(k for k, n in stored.items() if n > 1) == [], report
    assert answered_twice == [], report
    assert never_answered == [], report
    assert out_of_order == [], report
    assert [p for p, n in checkins.items() if n > 1] == [], report
    assert len({r.user_id for r in outreach}) == len(outreach), report  # one row a person
    assert sum(checkins.values()) >= len(CHECKIN_PEOPLE) // 2, report
    assert len(balancer.forwarded) == PROCESSES, report  # every process took webhooks
    assert exits == [0] * PROCESSES
    assert errors == [], "\n".join(errors[:20])


def in_order(telegram: FakeTelegramAPI, person: int) -> bool:
    """Each reply answers only messages newer than every message answered before it."""
    answered = 0
    for message in telegram.sent[person]:
        if not message.text.startswith("got "):
            continue
        numbers = [int(n) for n in NUMBER.findall(message.text)]
        if not numbers or min(numbers) <= answered:
            return False
        answered = max(numbers)
    return True
