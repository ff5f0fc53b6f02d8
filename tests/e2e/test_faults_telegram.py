"""Telegram faults end to end: the real python-telegram-bot against a loopback Bot API that
answers getUpdates with 5xx and 429, hangs up on a long poll or cuts its answer mid-body,
and fails a reply with a 5xx; then the hostile corpus through the whole Telegram path.

Every test checks what matters: each update stored once, answered once, none left waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.ratelimit import RateLimiter
from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.llm import LLMRequest
from memory.store.tables import Message
from tests.e2e.test_telegram import GatedLLM, rows, running
from tests.fakes.telegram_api import ApiError, FakeTelegramAPI
from tests.support.timezone_question import plain

ALICE, BOB, CAROL = 4001, 4002, 4003
ANSWER = "Tell me more."
POLL_DROP_AFTER = 0.3
LONGEST_POLL = 0.5


class FlakyTelegramAPI(FakeTelegramAPI):
    """The fake Bot API that also drops long polls and stamps every call's arrival.

    While `drop_polls` is positive, a getUpdates call is dropped: hung up on when nothing
    arrived within `POLL_DROP_AFTER` seconds, or cut mid-body when it has updates to give.
    Long polls last at most `LONGEST_POLL` seconds (Telegram may answer a poll early).
    """

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[tuple[str, float]] = []
        self.drop_polls = 0
        self.dropped: list[tuple[str, list[int]]] = []
        self.failed_at: list[tuple[str, int, float]] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        method = request.match_info["method"].lower()
        self.stamps.append((method, time.monotonic()))
        if method != "getupdates" or self.drop_polls <= 0:
            return await super()._handle(request)
        self.drop_polls -= 1
        answering = asyncio.create_task(super()._handle(request))
        done, _ = await asyncio.wait([answering], timeout=POLL_DROP_AFTER)
        if not done:
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answering
            self.dropped.append(("hang_up", []))
            return await _hang_up(request)
        response = answering.result()
        self.dropped.append(("cut", self.get_updates_calls[-1].returned))
        return await _cut(request, response.body)  # type: ignore[arg-type]

    async def _api_getupdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        timeout = min(float(params.get("timeout") or 0), LONGEST_POLL)
        return await super()._api_getupdates({**params, "timeout": timeout})

    def _scripted_failure(self, method: str, params: dict[str, Any]) -> None:
        try:
            super()._scripted_failure(method, params)
        except ApiError as exc:
            self.failed_at.append((method.lower(), exc.status, time.monotonic()))
            raise

    def wait_after(self, method: str, status: int) -> float:
        """Seconds from the call of `method` failed with `status` to the next such call."""
        failed = next(at for name, code, at in self.failed_at if (name, code) == (method, status))
        return min(at for name, at in self.stamps if name == method and at > failed) - failed


async def _hang_up(request: web.Request) -> web.StreamResponse:
    """Close the connection without an answer."""
    assert request.transport is not None
    request.transport.close()
    return web.StreamResponse()


async def _cut(request: web.Request, body: bytes) -> web.StreamResponse:
    """Send the headers and half the body, then close the connection."""
    response = web.StreamResponse(
        headers={"Content-Type": "application/json", "Content-Length": str(len(body))}
    )
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    assert request.transport is not None
    request.transport.close()
    return response


@pytest.fixture
def scripted_llm() -> GatedLLM:
    """A model that answers only while its gate is open (open by default)."""
    return GatedLLM()


@pytest.fixture
async def fake() -> AsyncIterator[FlakyTelegramAPI]:
    """The flaky fake Bot API."""
    api = FlakyTelegramAPI()
    async with api:
        yield api


async def settled(fake: FakeTelegramAPI, people: dict[int, int], within: float = 8.0) -> None:
    """Wait until each person got the number of messages given and nothing is pending."""
    await fake.wait_for(
        lambda: not fake.pending_updates and all(len(fake.sent[p]) >= n for p, n in people.items()),
        within,
    )
    await asyncio.sleep(0.2)  # anything sent twice would arrive now


async def stored_once(db: async_sessionmaker[AsyncSession], pushed: dict[int, int]) -> None:
    """Each pushed message is stored exactly once, answered, under its platform id."""
    users = await rows(db, Message.role == "user")
    assert sorted((int(m.chat_id or 0), int(m.platform_message_id or 0)) for m in users) == sorted(
        pushed.items()
    )
    assert {m.status for m in users} == {"answered"}


async def test_server_errors_and_flood_control_on_polling_lose_and_repeat_nothing(
    core: Core,
    fake: FlakyTelegramAPI,
    scripted_llm: GatedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    async with running(core, fake):
        pushed = {ALICE: fake.push_message(ALICE, "before the trouble")}
        await settled(fake, {ALICE: 1})
        fake.fail("getUpdates", 502, "Bad Gateway")
        fake.fail("getUpdates", 429, "Too Many Requests: retry after 1", retry_after=1)
        pushed[BOB] = fake.push_message(BOB, "during the trouble")
        pushed[CAROL] = fake.push_message(CAROL, "also during it")
        await settled(fake, {ALICE: 1, BOB: 1, CAROL: 1})

    assert {p: [plain(m.text) for m in fake.sent[p]] for p in pushed} == {
        p: [ANSWER] for p in pushed
    }
    assert len(scripted_llm.chat_requests) == 3
    await stored_once(db, pushed)
    assert [(name, code) for name, code, _ in fake.failed_at] == [
        ("getupdates", 502),
        ("getupdates", 429),
    ]
    assert fake.wait_after("getupdates", 429) >= 1.0  # Retry-After honoured


async def test_a_connection_dropped_mid_poll_loses_and_repeats_nothing(
    core: Core,
    fake: FlakyTelegramAPI,
    scripted_llm: GatedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    async with running(core, fake):
        pushed = {ALICE: fake.push_message(ALICE, "first")}
        await settled(fake, {ALICE: 1})
        fake.drop_polls = 2
        await fake.wait_for(lambda: len(fake.dropped) == 1)  # hung up while waiting
        pushed[BOB] = fake.push_message(BOB, "sent while the poll was down")
        await settled(fake, {ALICE: 1, BOB: 1})

    assert [kind for kind, _ in fake.dropped] == ["hang_up", "cut"]
    assert len(fake.dropped[1][1]) == 1  # Bob's update was in the answer that was cut
    assert {p: [plain(m.text) for m in fake.sent[p]] for p in pushed} == {
        p: [ANSWER] for p in pushed
    }
    assert len(scripted_llm.chat_requests) == 2
    await stored_once(db, pushed)


async def test_a_server_error_on_sending_a_reply_still_delivers_it_once(
    core: Core,
    fake: FlakyTelegramAPI,
    scripted_llm: GatedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    async with running(core, fake):
        fake.fail("sendMessage", 502, "Bad Gateway", chat_id=ALICE)
        pushed = {ALICE: fake.push_message(ALICE, "did you get this?")}
        with contextlib.suppress(TimeoutError):  # a retry after the 502 would come by then
            await fake.wait_for(lambda: bool(fake.sent[ALICE]), within=4)
        await asyncio.sleep(0.3)  # and anything sent twice would arrive now

    assert [plain(m.text) for m in fake.sent[ALICE]] == [ANSWER]
    assert len(scripted_llm.chat_requests) == 1
    await stored_once(db, pushed)


async def test_a_message_sent_while_the_last_is_answered_is_not_answered_twice(
    core: Core, fake: FlakyTelegramAPI, scripted_llm: GatedLLM
) -> None:
    async with running(core, fake):
        scripted_llm.gate.clear()  # the model is slow today
        fake.push_message(ALICE, "my interview is tomorrow")
        await fake.wait_for(lambda: (ALICE, "typing") in fake.chat_actions)
        fake.push_message(ALICE, "and I haven't prepared at all")
        await asyncio.sleep(0.5)  # the second message is stored and its burst has ended
        scripted_llm.gate.set()
        await fake.wait_for(lambda: bool(fake.sent[ALICE]))
        await asyncio.sleep(0.5)

    asked = [waiting_for_answer(request) for request in scripted_llm.chat_requests]
    said = ["my interview is tomorrow", "and I haven't prepared at all"]
    assert sorted(m for tail in asked for m in tail) == sorted(said)  # each answered once
    assert len(fake.sent[ALICE]) == len(asked)


def waiting_for_answer(request: LLMRequest) -> list[str]:
    """The person's messages after the companion's last turn: what the model answers."""
    tail: list[str] = []
    for turn in request.turns:
        tail = [*tail, turn.content] if turn.role == "user" else []
    return tail


async def test_the_hostile_corpus_through_telegram_gets_a_clear_reply_each(
    core: Core, fake: FlakyTelegramAPI
) -> None:
    entries = [e for e in _corpus() if 0 < len(e.encode("utf-16-le", "surrogatepass")) <= 8192]
    senders = {5000 + i: entry for i, entry in enumerate(entries)}
    async with running(core, fake, limiter=RateLimiter(per_minute=10_000, burst=100)):
        for person, entry in senders.items():
            fake.push_message(person, entry)
        await fake.wait_for(lambda: all(fake.sent[p] for p in senders), within=20)
        await asyncio.sleep(0.3)

    texts = {p: [m.text for m in fake.sent[p] if m.document is None] for p in senders}
    unclear = [ascii(senders[p][:40]) for p, sent in texts.items() if len(sent) != 1]
    assert unclear == []  # one clear text reply each (an export adds its file)
    assert all(sent[0].strip() for sent in texts.values())


async def test_forged_callback_data_through_telegram_is_answered_as_stale(
    core: Core, fake: FlakyTelegramAPI
) -> None:
    forged = [data for data in _corpus("callbacks") if data]  # Telegram never sends empty data
    pressers = {6000 + i: data for i, data in enumerate(forged)}
    async with running(core, fake, limiter=RateLimiter(per_minute=10_000, burst=100)):
        for person, data in pressers.items():
            fake.start_chat(person)
            fake.push_callback(person, data, message_id=1)
        await fake.wait_for(lambda: all(fake.sent[p] for p in pressers), within=10)
        await asyncio.sleep(0.3)

    assert len(fake.callback_answers) == len(pressers)  # every spinner stopped
    answers = {ascii(data[:40]): [m.text for m in fake.sent[p]] for p, data in pressers.items()}
    assert answers == {ascii(data[:40]): [STALE_BUTTON] for data in pressers.values()}


def _corpus(*sections: str) -> list[str]:
    """Entries of the hostile corpus as text: by default every message and odd command."""
    corpus: dict[str, Any] = json.loads(
        (Path(__file__).parents[1] / "data" / "hostile_inputs.json").read_text("utf-8")
    )
    if sections:
        raw = [e for section in sections for e in corpus[section]]
    else:
        raw = [e for entries in corpus["messages"].values() for e in entries]
        raw += corpus["commands"]["odd_forms"] + corpus["commands"]["aimed_at_someone_else"]
    return [e if isinstance(e, str) else e["repeat"] * e["times"] for e in raw]
