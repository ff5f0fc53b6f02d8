"""The load generator of `bench/load_telegram.py`: the shape of the load, the Telegram fake
that stamps what the bot sends, a model that answers after a realistic latency, and the
simulated people."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.anthropic_api import Step, TextReply, ToolUseReply
from tests.fakes.telegram_api import FakeTelegramAPI, SentMessage

MARK = re.compile(r"#u\d+-\d+")
FIRST_USER_ID = 100_000


@dataclass(frozen=True)
class LoadConfig:
    """The shape of the load."""

    people: int = 1000
    seconds: float = 60.0
    model_latency: float = 1.0
    think: tuple[float, float] = (30.0, 90.0)  # between reading a reply and writing again
    ramp: float = 60.0  # each person's first message comes within this many seconds
    burst_window: float = 2.0  # the bot's default
    drain: float = 120.0  # after the run, how long to wait for the last replies (a backlog)
    seed: int = 7


class LoadTelegramAPI(FakeTelegramAPI):
    """The fake Bot API that stamps each message the bot sends and wakes its chat's reader."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: dict[int, list[tuple[float, str]]] = defaultdict(list)
        self.chat_calls: dict[bool, list[float]] = {True: [], False: []}  # typing or not
        self._woken: dict[int, asyncio.Event] = defaultdict(asyncio.Event)

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"].lower()
        if method.startswith(("send", "edit")):
            self.chat_calls[method == "sendchataction"].append(time.monotonic())
        return await super()._handle(request)

    def busiest_second(self, *, typing: bool) -> int:
        """The most messages (or typing indicators) that arrived within one second."""
        per_second = Counter(int(at) for at in self.chat_calls[typing])
        return max(per_second.values(), default=0)

    def _record_sent(self, sent: SentMessage, extra: dict[str, Any]) -> dict[str, Any]:
        message = super()._record_sent(sent, extra)
        self.arrivals[sent.chat_id].append((time.monotonic(), sent.text))
        self._woken[sent.chat_id].set()
        return message

    async def reply_to(self, chat: int, mark: str, within: float) -> float | None:
        """When a reply mentioning `mark` arrived in `chat` (None if none came in time)."""
        deadline = time.monotonic() + within
        while True:
            for at, text in self.arrivals[chat]:
                if mark in MARK.findall(text):
                    return at
            self._woken[chat].clear()
            try:
                await asyncio.wait_for(self._woken[chat].wait(), deadline - time.monotonic())
            except TimeoutError:
                return None


@dataclass
class SlowModel:
    """The fake model: answers every request after `latency`, recording when each message
    reached it and how long it took."""

    latency: float
    took: dict[str, float] = field(default_factory=dict)
    asked_at: dict[str, float] = field(default_factory=dict)

    async def __call__(self, body: dict[str, Any]) -> Step:
        started = time.monotonic()
        tool = (body.get("tool_choice") or {}).get("name")
        last = next(m for m in reversed(body["messages"]) if m["role"] == "user")
        marks = MARK.findall(json.dumps(last["content"])) if tool is None else []
        for mark in marks:
            self.asked_at.setdefault(mark, started)
        await asyncio.sleep(self.latency)
        if tool == "record_memories":
            return ToolUseReply(tool, {"memories": []})
        if tool is not None:
            return ToolUseReply(tool, {"send": False, "message": ""})
        for mark in marks:
            self.took[mark] = time.monotonic() - started
        return TextReply("got " + " ".join(marks) if marks else "got it")


@dataclass
class Crowd:
    """The simulated people."""

    config: LoadConfig
    fake: LoadTelegramAPI
    pushed: dict[tuple[int, int], str] = field(default_factory=dict)
    answers: dict[str, float] = field(default_factory=dict)
    sent_at: dict[str, float] = field(default_factory=dict)

    async def run(self) -> None:
        """Everyone chats until the time is up, then waits for their last reply."""
        rng = random.Random(self.config.seed)
        end = time.monotonic() + self.config.seconds
        plans = [
            (FIRST_USER_ID + n, random.Random(rng.random())) for n in range(self.config.people)
        ]
        await asyncio.gather(
            *(self._person(n, who, own, end) for n, (who, own) in enumerate(plans))
        )

    async def _person(self, n: int, who: int, rng: random.Random, end: float) -> None:
        await asyncio.sleep(rng.uniform(0, self.config.ramp))
        count = 0
        while time.monotonic() < end:
            count += 1
            mark = f"#u{n}-{count}"
            self.sent_at[mark] = time.monotonic()
            message_id = self.fake.push_message(
                who, f"Here is how my day went, part {count} {mark}"
            )
            self.pushed[(who, message_id)] = mark
            remaining = max(end - time.monotonic(), 0) + self.config.drain
            arrived = await self.fake.reply_to(who, mark, remaining)
            if arrived is None:
                return
            self.answers[mark] = arrived
            pause = rng.uniform(*self.config.think)
            if time.monotonic() + pause >= end:
                return
            await asyncio.sleep(pause)
