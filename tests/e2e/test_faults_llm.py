"""Language model faults the other tests leave out, end to end: the real anthropic SDK
against a loopback Messages API that cuts answers off mid-body, garbles them, or answers
a forced tool call with unusable input; a whole core on the test PostgreSQL.

Rate limits, overload, 5xx and timeouts are covered by `test_anthropic_llm.py` (the
client) and `test_console.py` (the whole process).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.anthropic_llm import AnthropicLLM
from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.conversation import APOLOGY
from bot.domain import IncomingMessage
from memory.store.tables import Memory, Message
from memory.store.tables import Session as SessionRow
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropicAPI, Step, TextReply, ToolUseReply
from tests.fakes.quoted import person_said
from tests.support.timezone_question import plain

KEY = "sk-ant-test-key"
HEARD = "I hear you."
IDLE = timedelta(minutes=30)


@dataclass(frozen=True)
class RawReply:
    """Answer 200 with these bytes; with `cut`, the connection drops after that many."""

    body: bytes
    content_type: str = "application/json"
    cut: int | None = None


Answer = Step | RawReply | Callable[[dict[str, Any]], Step]


@dataclass
class Model:
    """The fake model: chat turns get `HEARD` (or `broken`); extraction follows a script."""

    broken: RawReply | None = None
    extraction: list[Answer] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Step:
        if (body.get("tool_choice") or {}).get("name") == "record_memories":
            answer = self.extraction.pop(0) if self.extraction else _nothing
            return answer(body) if callable(answer) else answer  # type: ignore[return-value]
        return self.broken or TextReply(HEARD)  # type: ignore[return-value]


def _nothing(body: dict[str, Any]) -> Step:
    return ToolUseReply("record_memories", {"memories": []})


class FaultyMessagesAPI(FakeAnthropicAPI):
    """The fake Messages API, able to answer with a broken body as well (one request at a
    time: the request being answered is kept for cutting its connection)."""

    current: web.Request | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.current = request
        return await super()._handle(request)

    async def _answer(self, step: Any, body: dict[str, Any]) -> web.Response:
        if not isinstance(step, RawReply):
            return await super()._answer(step, body)
        request = self.current
        assert request is not None
        if step.cut is None:
            return web.Response(body=step.body, content_type=step.content_type)
        response = web.StreamResponse(
            headers={"Content-Type": step.content_type, "Content-Length": str(len(step.body))}
        )
        await response.prepare(request)
        await response.write(step.body[: step.cut])
        assert request.transport is not None
        request.transport.close()  # the connection drops mid-body
        return response  # type: ignore[return-value]


GARBLED = {
    "cut off JSON": RawReply(b'{"id": "msg_1", "type": "mess'),
    "an HTML error page": RawReply(b"<html>502 Bad Gateway</html>", content_type="text/html"),
    "JSON of another shape": RawReply(b'{"hello": "world"}'),
    "an empty body": RawReply(b""),
}


@pytest.fixture
def model() -> Model:
    """How the fake model answers."""
    return Model()


@pytest.fixture
async def api(model: Model) -> AsyncIterator[FaultyMessagesAPI]:
    """The fake Messages API on a loopback port."""
    fake = FaultyMessagesAPI(api_key=KEY, responder=model)
    async with fake:
        yield fake


@pytest.fixture
async def core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    tmp_path: Path,
    api: FaultyMessagesAPI,
) -> AsyncIterator[Core]:
    """A whole core whose model is `AnthropicLLM` on the fake (two retries, tiny backoff)."""

    async def no_wait(seconds: float) -> None:
        return None

    llm = AnthropicLLM(
        api_key=KEY,
        chat_model="claude-chat-test",
        fast_model="claude-fast-test",
        base_url=api.base_url,
        timeout_seconds=2,
        max_retries=2,
        sleep=no_wait,
    )
    settings = Settings(database_url=database_url, data_dir=tmp_path, anthropic_api_key=KEY)
    built = await build_core(settings, llm=llm, clock=clock)
    yield built
    await built.aclose()


def says(words: str) -> IncomingMessage:
    """Alice writes in her private chat."""
    return IncomingMessage("console", "alice", words, chat_id="chat-alice", display_name="Alice")


async def messages(db: async_sessionmaker[AsyncSession]) -> list[tuple[str, str, str]]:
    """(role, status, content) of every stored message, oldest first."""
    async with db() as s:
        rows = (await s.scalars(select(Message).order_by(Message.id))).all()
    return [(m.role, m.status, m.content) for m in rows]


async def test_an_answer_cut_off_mid_body_is_retried_and_answered_once(
    core: Core, api: FaultyMessagesAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    complete = b'{"id": "msg_1", "type": "message", "role": "assistant", "content": []}'
    api.queue(RawReply(complete, cut=30))  # type: ignore[arg-type]

    reply = await core.router.handle(says("are you there?"))

    assert plain(reply.text) == HEARD  # (with the first contact's timezone question)
    assert len(api.requests) == 2
    assert await messages(db) == [
        ("user", "answered", "are you there?"),
        ("assistant", "stored", HEARD),
    ]


@pytest.mark.parametrize("garbled", GARBLED.values(), ids=GARBLED.keys())
async def test_a_garbled_answer_gets_the_apology_and_the_message_is_kept(
    core: Core,
    model: Model,
    api: FaultyMessagesAPI,
    db: async_sessionmaker[AsyncSession],
    garbled: RawReply,
) -> None:
    model.broken = garbled

    reply = await core.router.handle(says("my cat Miso is ill"))

    assert reply.text == APOLOGY
    assert await messages(db) == [
        ("user", "unanswered", "my cat Miso is ill"),
        ("assistant", "apology", APOLOGY),
    ]
    model.broken = None
    assert plain((await core.router.handle(says("hello?"))).text) == HEARD
    assert "my cat Miso is ill" in str(api.last_request["messages"])


async def test_unusable_tool_output_in_extraction_is_retried_later_and_stores_once(
    core: Core, model: Model, clock: FakeClock, db: async_sessionmaker[AsyncSession]
) -> None:
    model.extraction += [
        ToolUseReply("record_memories", {"memories": "lots"}),
        ToolUseReply("record_memories", {"facts": [{"content": "The person has a sister"}]}),
        TextReply("I'd rather just chat."),  # the forced tool was not called
        _sister_in_aarhus,
    ]
    assert plain((await core.router.handle(says("my sister Maja lives in Aarhus"))).text) == HEARD
    clock.advance(hours=2)

    for attempt in (1, 2, 3):
        await core.memory.sweep(idle_gap=IDLE)
        assert await extraction_state(db) == (None, attempt, True)
        assert await memories(db) == []
    await core.memory.sweep(idle_gap=IDLE)
    await core.memory.sweep(idle_gap=IDLE)

    stored = await message_ids(db)
    said_id = next(id_ for id_, role in stored if role == "user")
    assert await extraction_state(db) == (stored[-1][0], 0, False)
    assert await memories(db) == [("The person's sister Maja lives in Aarhus", [said_id])]
    assert model.extraction == []


def _sister_in_aarhus(body: dict[str, Any]) -> Step:
    prompt = str(body["messages"][0]["content"])
    said = person_said(prompt)[-1].id
    memory = {
        "content": "The person's sister Maja lives in Aarhus",
        "category": "relationship",
        "tier": "core",
        "importance": 7,
        "confidence": 0.95,
        "evidence_message_ids": [said],
    }
    return ToolUseReply("record_memories", {"memories": [memory]})


async def extraction_state(db: async_sessionmaker[AsyncSession]) -> tuple[int | None, int, bool]:
    """(watermark, failed attempts, still due) of the one session."""
    async with db() as s:
        row = (await s.scalars(select(SessionRow))).one()
    return row.extracted_through, row.extraction_attempts, row.extraction_due


async def memories(db: async_sessionmaker[AsyncSession]) -> list[tuple[str, list[int]]]:
    """(content, source message ids) of every memory row."""
    async with db() as s:
        rows = (await s.scalars(select(Memory).order_by(Memory.id))).all()
    return [(m.content, list(m.source_message_ids)) for m in rows]


async def message_ids(db: async_sessionmaker[AsyncSession]) -> list[tuple[int, str]]:
    """(id, role) of every stored message, oldest first."""
    async with db() as s:
        rows = (await s.scalars(select(Message).order_by(Message.id))).all()
    return [(m.id, m.role) for m in rows]
