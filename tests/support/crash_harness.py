"""The test side of the crash tests: the forking child process (`Zygote`), the fake
model's answers (`CrashModel`), people who keep writing (`Chatter`), and the checks run
on the database and on what the fakes received afterwards.

Every random choice comes from one seeded `random.Random`, so a run can be repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from random import Random
from typing import Any

from tests.fakes.anthropic_api import Step, TextReply, ToolUseReply
from tests.fakes.quoted import person_said
from tests.fakes.telegram_api import FakeTelegramAPI

TOKEN = re.compile(r"#p\d+-\d+")
FACT = re.compile(r"fact:(\d+)")
CHECKIN = "Good morning! How are you doing today?"
FACTS = (
    "The person plays the cello in an amateur orchestra",
    "The person grew up on a sheep farm in Wales",
    "The person is allergic to penicillin",
    "The person's daughter Ida starts school in August",
    "The person works night shifts as a paramedic",
    "The person collects vintage Polaroid cameras",
    "The person is training for the Berlin marathon",
    "The person's landlord refuses to fix the heating",
    "The person speaks fluent Japanese",
    "The person's favourite dish is lamb tagine",
    "The person volunteers at an animal shelter on Sundays",
    "The person is afraid of deep water",
    "The person drives an old red Volvo estate",
    "The person's grandfather was a lighthouse keeper",
    "The person is writing a fantasy novel about dragons",
    "The person keeps bees in the back garden",
    "The person studied chemistry at university in Lund",
    "The person's best friend Tomas moved to Canada",
    "The person hates coriander",
    "The person is saving money for a trip to Patagonia",
    "The person broke their wrist while skiing last winter",
    "The person has two cats called Pixel and Mochi",
    "The person sings in a gospel choir",
    "The person is learning to fly small planes",
    "The person's mother runs a bakery in Porto",
    "The person prefers tea over coffee",
    "The person repairs antique clocks as a hobby",
    "The person was born on Christmas Day",
    "The person is colour blind",
    "The person's brother is a professional chess player",
)
"""Facts far apart in meaning (cosine below 0.3), so none is taken for another."""


class Zygote:
    """`python -m tests.support.crash_worker`: forks workers, reaps them, reports."""

    def __init__(self, log_path: Path) -> None:
        self._log_path = log_path
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._lines: dict[str, asyncio.Queue[int]] = {}
        self.ready: set[int] = set()
        self.alive: set[int] = set()
        self._changed = asyncio.Event()

    async def start(self) -> None:
        """Start the child process (it imports the bot once)."""
        env = os.environ | {"OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        with self._log_path.open("ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.support.crash_worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=Path(__file__).parents[2],
            )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        async for raw in self._process.stdout:
            kind, _, rest = raw.decode().strip().partition(" ")
            if kind == "ready":
                self.ready.add(int(rest))
                self._changed.set()
            elif kind == "spawned":
                await self._queue(kind).put(int(rest))
            elif kind == "exited":
                await self._queue(kind).put(int(rest.split()[1]))  # "<pid> <status>"

    def _queue(self, kind: str) -> asyncio.Queue[int]:
        return self._lines.setdefault(kind, asyncio.Queue())

    async def _command(self, line: str, answer: str) -> int:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(f"{line}\n".encode())
        await self._process.stdin.drain()
        return await asyncio.wait_for(self._queue(answer).get(), 20)

    async def spawn(self, config: dict[str, Any], *, within: float = 15.0) -> int:
        """A new worker, once it polls Telegram."""
        pid = await self._command(f"spawn {json.dumps(config)}", "spawned")
        self.alive.add(pid)
        async with asyncio.timeout(within):
            while pid not in self.ready:
                self._changed.clear()
                await self._changed.wait()
        return pid

    async def end(self, pid: int, signum: signal.Signals) -> int:
        """Send `signum` and wait for the worker to exit; its status."""
        os.kill(pid, signum)
        status = await self._command(f"wait {pid}", "exited")
        self.alive.discard(pid)
        return status

    async def close(self) -> None:
        """Kill any worker still running, then let the child process exit."""
        for pid in list(self.alive):
            await self.end(pid, signal.SIGKILL)
        if self._process is None:
            return
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), 10)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()
        if self._reader is not None:
            await self._reader


@dataclass
class CrashModel:
    """The fake model, answering chat, extraction and check-ins after a random latency;
    counts what is in flight by kind."""

    rng: Random
    latency: tuple[float, float] = (0.05, 0.4)
    in_flight: Counter[str] = field(default_factory=Counter)
    served: Counter[str] = field(default_factory=Counter)

    async def __call__(self, body: dict[str, Any]) -> Step:
        kind = _kind(body)
        self.in_flight[kind] += 1
        try:
            await asyncio.sleep(self.rng.uniform(*self.latency))
        finally:
            self.in_flight[kind] -= 1
        self.served[kind] += 1
        if kind == "extraction":
            return ToolUseReply("record_memories", {"memories": _facts_in(body)})
        if kind == "checkin":
            return ToolUseReply("decide_checkin", {"send": True, "message": CHECKIN})
        last = next(m for m in reversed(body["messages"]) if m["role"] == "user")
        tokens = TOKEN.findall(json.dumps(last["content"]))
        return TextReply("got " + " ".join(tokens) if tokens else "got it")


def _kind(body: dict[str, Any]) -> str:
    name = (body.get("tool_choice") or {}).get("name")
    return {"record_memories": "extraction", "decide_checkin": "checkin", None: "turn"}.get(
        name, "other"
    )


def _facts_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    """One memory per `fact:N` in the person's own messages, citing that message."""
    found = []
    for said in person_said(str(body["messages"][0]["content"])):
        fact = FACT.search(said.text)
        if fact is not None:
            found.append(
                {
                    "content": FACTS[int(fact[1])],
                    "category": "fact",
                    "tier": "core",
                    "importance": 6,
                    "confidence": 0.9,
                    "evidence_message_ids": [said.id],
                }
            )
    return found


@dataclass
class Chatter:
    """People who each write, wait for the answer (a while), think, and write again."""

    fake: FakeTelegramAPI
    rng: Random
    people: tuple[int, ...]
    pushed: dict[tuple[int, int], str] = field(default_factory=dict)
    """(chat, Telegram message id) → the message's token."""
    running: bool = True
    _written: Counter[int] = field(default_factory=Counter)

    async def run(self) -> None:
        """Write until `running` is cleared."""
        await asyncio.gather(*(self._person(person) for person in self.people))

    async def last_words(self, within: float = 5.0) -> None:
        """Everyone writes once more and waits for the answer."""
        await asyncio.gather(*(self._write(person, within) for person in self.people))

    async def _person(self, person: int) -> None:
        while self.running:
            await self._write(person, 1.5)  # no answer by then (the bot is down): write on
            await asyncio.sleep(self.rng.uniform(0.05, 0.4))

    async def _write(self, person: int, wait: float) -> None:
        self._written[person] += 1
        count = self._written[person]
        token = f"#p{self.people.index(person)}-{count}"
        fact = count // 3 if count % 3 == 0 and count // 3 < len(FACTS) else None
        words = f"fact:{fact} from me" if fact is not None else "just chatting"
        self.pushed[(person, self.fake.push_message(person, f"{words} {token}"))] = token
        with contextlib.suppress(TimeoutError):
            await self.fake.wait_for(partial(_answered, self.fake, person, token), wait)


def fact_in(words: str) -> int | None:
    """The index of the fact a message states (`fact:N`), if any."""
    found = FACT.search(words)
    return int(found[1]) if found is not None else None


def _answered(fake: FakeTelegramAPI, person: int, token: str) -> bool:
    return any(token in TOKEN.findall(m.text) for m in fake.sent[person])


def replies_by_token(fake: FakeTelegramAPI, people: tuple[int, ...]) -> Counter[tuple[int, str]]:
    """How many sent replies mention each (person, token)."""
    counts: Counter[tuple[int, str]] = Counter()
    for person in people:
        for message in fake.sent[person]:
            if message.text.startswith("got "):
                counts.update((person, token) for token in TOKEN.findall(message.text))
    return counts


def noticed_facts(fake: FakeTelegramAPI, people: tuple[int, ...]) -> Counter[tuple[int, str]]:
    """How many 'I noted' notices list each (person, fact)."""
    counts: Counter[tuple[int, str]] = Counter()
    for person in people:
        for message in fake.sent[person]:
            if message.text.startswith("I noted"):
                counts.update((person, fact) for fact in FACTS if fact in message.text)
    return counts
