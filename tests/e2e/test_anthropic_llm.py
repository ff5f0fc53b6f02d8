"""`AnthropicLLM` through the real SDK against the loopback fake of the Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import pytest
import structlog

from bot.anthropic_llm import AnthropicLLM
from bot.errors import LLMBadOutput, LLMTruncated, LLMUnavailable
from bot.llm import CONVERSATION_START, LLMRequest, ModelRole, ToolCall, ToolResult, ToolSpec, Turn
from bot.llm_tools import LLMToolCaller
from memory.store.errors import AnswerTruncated
from tests.fakes.anthropic_api import FakeAnthropicAPI

API_KEY = "sk-ant-test-key"
BACKOFF = 0.01
MAX_RETRY_AFTER = 5.0
PERSONA = "You are Mira, a warm companion. " * 20
LONG_PERSONA = "You are Mira, a warm companion who listens closely. " * 90
"""About 1,150 tokens: past the 1,024-token minimum the fake caches for this model."""
REMEMBER = ToolSpec(
    name="remember",
    description="Save a fact about the person.",
    input_schema={"type": "object", "properties": {"fact": {"type": "string"}}},
)


class RecordedSleeps(list[float]):
    """Stands in for `asyncio.sleep`: records each backoff instead of waiting."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    """The fake Messages API, expecting `API_KEY`."""
    async with FakeAnthropicAPI(api_key=API_KEY) as api:
        yield api


@pytest.fixture
def sleeps() -> RecordedSleeps:
    """The backoffs the client asked for."""
    return RecordedSleeps()


@pytest.fixture
async def llm(fake: FakeAnthropicAPI, sleeps: RecordedSleeps) -> AsyncIterator[AnthropicLLM]:
    """The client under test, pointed at the fake, with three retries."""
    client = make_llm(fake.base_url, sleeps)
    yield client
    await client.aclose()


def make_llm(base_url: str, sleep: RecordedSleeps, **overrides: Any) -> AnthropicLLM:
    """A client with short timeouts and tiny backoff."""
    options: dict[str, Any] = {
        "api_key": API_KEY,
        "chat_model": "claude-chat-test",
        "fast_model": "claude-fast-test",
        "base_url": base_url,
        "timeout_seconds": 0.3,
        "max_retries": 3,
        "backoff_seconds": BACKOFF,
        "max_retry_after_seconds": MAX_RETRY_AFTER,
        "sleep": sleep,
        **overrides,
    }
    return AnthropicLLM(**options)


def ask(text: str = "How are you?", **fields: Any) -> LLMRequest:
    """A chat request with the persona as the stable system prompt."""
    fields.setdefault("role", "chat")
    fields.setdefault("stable_system", PERSONA)
    return LLMRequest(turns=(Turn("user", text),), **fields)


# Answers


async def test_a_text_reply_comes_back_with_usage(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    fake.queue_text("Doing well, thanks for asking!")

    completion = await llm.complete(ask())

    assert completion.text == "Doing well, thanks for asking!"
    assert completion.model == "claude-chat-test"
    assert completion.stop_reason == "end_turn"
    assert completion.tool_calls == ()
    assert completion.usage.input_tokens > 0
    assert completion.usage.output_tokens > 0
    assert fake.last_request["max_tokens"] == 1024
    assert fake.request_headers[-1]["Authorization"] == f"Bearer {API_KEY}"


async def test_a_reply_cut_at_max_tokens_is_still_an_answer(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    fake.queue_text("Well, it all started", stop_reason="max_tokens")

    completion = await llm.complete(ask(max_tokens=5))

    assert completion.stop_reason == "max_tokens"
    assert completion.text == "Well, it all started"


async def test_the_stable_system_prompt_is_cached_and_read_back(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    first = await llm.complete(ask(dynamic_system="It is Monday.", stable_system=LONG_PERSONA))
    second = await llm.complete(ask(dynamic_system="It is Tuesday.", stable_system=LONG_PERSONA))

    assert fake.requests[0]["system"] == [
        {"type": "text", "text": LONG_PERSONA, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "It is Monday."},
    ]
    assert first.usage.cache_write_tokens > 0
    assert first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens
    assert second.usage.cache_write_tokens == 0


async def test_an_empty_dynamic_system_prompt_is_left_out(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    await llm.complete(ask())

    assert [block["text"] for block in fake.last_request["system"]] == [PERSONA]


@pytest.mark.parametrize(
    ("role", "model"), [("chat", "claude-chat-test"), ("fast", "claude-fast-test")]
)
async def test_the_role_picks_the_model(
    llm: AnthropicLLM, fake: FakeAnthropicAPI, role: ModelRole, model: str
) -> None:
    completion = await llm.complete(ask(role=role))

    assert fake.last_request["model"] == model
    assert completion.model == model


async def test_turns_are_merged_to_alternate_and_start_with_the_user(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    turns = (
        Turn("assistant", "Morning! How did the interview go?"),
        Turn("user", "It went well."),
        Turn("user", "   "),
        Turn("user", "They call back Friday."),
        Turn("assistant", "That's great."),
        Turn("assistant", "Fingers crossed!"),
        Turn("user", "Thanks"),
    )

    await llm.complete(LLMRequest(role="chat", stable_system=PERSONA, turns=turns))

    assert fake.last_request["messages"] == [
        {"role": "user", "content": CONVERSATION_START},
        {"role": "assistant", "content": "Morning! How did the interview go?"},
        {"role": "user", "content": "It went well.\n\nThey call back Friday."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "That's great.\n\nFingers crossed!",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
        {"role": "user", "content": "Thanks"},
    ]


# Tools


async def test_a_forced_tool_call_is_sent_and_parsed(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    fake.queue_tool_use("remember", {"fact": "likes green tea"})

    completion = await llm.complete(ask(tools=(REMEMBER,), force_tool="remember"))

    assert fake.last_request["tools"] == [
        {
            "name": "remember",
            "description": "Save a fact about the person.",
            "input_schema": REMEMBER.input_schema,
        }
    ]
    assert fake.last_request["tool_choice"] == {"type": "tool", "name": "remember"}
    assert completion.stop_reason == "tool_use"
    [call] = completion.tool_calls
    assert (call.name, call.input) == ("remember", {"fact": "likes green tea"})
    assert call.id.startswith("toolu_")


async def test_a_tool_exchange_goes_back_as_tool_use_and_tool_result(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    fake.queue_tool_use("remember", {"fact": "has a cat"}, text="Noted.")
    fake.queue_text("I'll remember your cat.")
    first = await llm.complete(ask("I have a cat", tools=(REMEMBER,)))
    [call] = first.tool_calls

    exchange = ((first.tool_calls, (ToolResult(call.id, "saved"),)),)
    second = await llm.complete(ask("I have a cat", tools=(REMEMBER,), tool_exchange=exchange))

    assert second.text == "I'll remember your cat."
    assert fake.last_request["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": call.id, "name": "remember", "input": call.input}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "saved"}],
        },
    ]


async def test_assistant_text_before_a_tool_exchange_joins_the_tool_use_message(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    call = ToolCall("toolu_1", "remember", {"fact": "has a cat"})
    exchange = (((call,), (ToolResult("toolu_1", "saved"),)),)
    turns = (Turn("user", "I have a cat"), Turn("assistant", "Let me note that."))

    await llm.complete(
        LLMRequest(role="chat", stable_system=PERSONA, turns=turns, tool_exchange=exchange)
    )

    assert fake.last_request["messages"][1]["content"] == [
        {"type": "text", "text": "Let me note that."},
        {"type": "tool_use", "id": "toolu_1", "name": "remember", "input": call.input},
    ]


async def test_a_forced_tool_that_is_not_called_is_bad_output(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    fake.queue_text("I'd rather just chat.")

    with pytest.raises(LLMBadOutput, match="remember"):
        await llm.complete(ask(tools=(REMEMBER,), force_tool="remember"))


async def test_a_forced_tool_call_cut_off_at_max_tokens_is_truncated_never_used(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    fake.queue_tool_use("remember", {"fact": "likes gr"}, stop_reason="max_tokens")
    fake.queue_text("Let me think about wh", stop_reason="max_tokens")

    for _ in range(2):  # cut inside the call, and before it started
        with pytest.raises(LLMTruncated, match="max_tokens"):
            await llm.complete(ask(tools=(REMEMBER,), force_tool="remember"))


async def test_the_tool_caller_reports_a_cut_off_answer_and_asks_with_more_room(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    caller = LLMToolCaller(llm, max_tokens=300)
    call = {
        "system": "Record facts.",
        "prompt": "I like green tea",
        "tool_name": "remember",
        "tool_description": REMEMBER.description,
        "input_schema": REMEMBER.input_schema,
    }
    fake.queue_tool_use("remember", {"fact": "likes gr"}, stop_reason="max_tokens")
    with pytest.raises(AnswerTruncated):
        await caller.call_tool(**call)
    assert fake.last_request["max_tokens"] == 300

    fake.queue_tool_use("remember", {"fact": "likes green tea"})
    assert await caller.call_tool(**call, max_tokens=8192) == {"fact": "likes green tea"}
    assert fake.last_request["max_tokens"] == 8192


# Retries


@pytest.mark.parametrize(("retry_after", "waited"), [(2, 2.0), (600, MAX_RETRY_AFTER)])
async def test_a_rate_limit_waits_for_retry_after_then_succeeds(
    llm: AnthropicLLM,
    fake: FakeAnthropicAPI,
    sleeps: RecordedSleeps,
    retry_after: float,
    waited: float,
) -> None:
    fake.queue_error(429, retry_after=retry_after)
    fake.queue_text("Back again.")

    completion = await llm.complete(ask())

    assert completion.text == "Back again."
    assert sleeps == [waited]
    assert len(fake.requests) == 2


@pytest.mark.parametrize("status", [529, 500, 503])
async def test_a_server_error_is_retried_with_backoff(
    llm: AnthropicLLM, fake: FakeAnthropicAPI, sleeps: RecordedSleeps, status: int
) -> None:
    fake.queue_error(status)
    fake.queue_text("Here now.")

    completion = await llm.complete(ask())

    assert completion.text == "Here now."
    [slept] = sleeps
    assert BACKOFF / 2 <= slept <= BACKOFF


async def test_a_timeout_is_retried(
    llm: AnthropicLLM, fake: FakeAnthropicAPI, sleeps: RecordedSleeps
) -> None:
    fake.queue_delay(5.0)
    fake.queue_text("Sorry, I was slow.")

    completion = await llm.complete(ask())

    assert completion.text == "Sorry, I was slow."
    assert len(sleeps) == 1
    assert len(fake.requests) == 2


async def test_when_every_attempt_fails_the_model_is_unavailable(
    llm: AnthropicLLM, fake: FakeAnthropicAPI, sleeps: RecordedSleeps
) -> None:
    for _ in range(4):
        fake.queue_error(529)

    with pytest.raises(LLMUnavailable, match="529") as raised:
        await llm.complete(ask())

    assert isinstance(raised.value.__cause__, anthropic.APIStatusError)
    assert len(fake.requests) == 4
    assert len(sleeps) == 3
    for attempt, slept in enumerate(sleeps):
        ceiling = BACKOFF * 2**attempt
        assert ceiling / 2 <= slept <= ceiling


async def test_an_unreachable_server_is_unavailable_after_retries(sleeps: RecordedSleeps) -> None:
    async with FakeAnthropicAPI() as gone:
        base_url = gone.base_url
    llm = make_llm(base_url, sleeps, max_retries=1)

    with pytest.raises(LLMUnavailable, match="unreachable") as raised:
        await llm.complete(ask())
    await llm.aclose()

    assert isinstance(raised.value.__cause__, anthropic.APIConnectionError)
    assert len(sleeps) == 1


async def test_a_bad_request_is_not_retried(
    llm: AnthropicLLM, fake: FakeAnthropicAPI, sleeps: RecordedSleeps
) -> None:
    fake.queue_error(400, message="messages: something is off")

    with pytest.raises(LLMUnavailable, match="400"):
        await llm.complete(ask())

    assert len(fake.requests) == 1
    assert sleeps == []


async def test_a_wrong_key_is_not_retried(fake: FakeAnthropicAPI, sleeps: RecordedSleeps) -> None:
    llm = make_llm(fake.base_url, sleeps, api_key="sk-ant-wrong")

    with pytest.raises(LLMUnavailable, match="authentication_error"):
        await llm.complete(ask())
    await llm.aclose()

    assert len(fake.requests) == 1
    assert sleeps == []


# Logs


async def test_logs_carry_counts_but_never_prompt_text_or_the_key(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    fake.queue_error(429, retry_after=1)
    fake.queue_text("A private reply.")

    with structlog.testing.capture_logs() as logs:
        await llm.complete(ask("my private diagnosis", dynamic_system="secret memory"))

    events = [entry["event"] for entry in logs]
    assert events == ["llm.retry", "llm.completed"]
    assert logs[0]["status"] == 429
    assert logs[1]["input_tokens"] > 0
    assert "latency_ms" in logs[1]
    dumped = repr(logs)
    for secret in ("my private diagnosis", "secret memory", "A private reply", API_KEY, "Mira"):
        assert secret not in dumped


# The fake itself: it refuses what the real API refuses, and can be scripted by a function


async def test_the_fake_refuses_a_request_without_a_key(fake: FakeAnthropicAPI) -> None:
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"anthropic-version": "2023-06-01"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake.base_url}/v1/messages", json=body, headers=headers) as response,
    ):
        answer = await response.json()

    assert response.status == 401
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "authentication_error"
    assert response.headers["request-id"].startswith("req_")


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "remember", "input": {}}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "must alternate"),
        ([{"role": "assistant", "content": "a"}], "first message"),
        ([{"role": "user", "content": ""}], "non-empty content"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [TOOL_USE]},
                {"role": "user", "content": "ok"},
            ],
            "without `tool_result` blocks",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}],
                }
            ],
            "unexpected `tool_use_id`",
        ),
    ],
)
async def test_the_fake_refuses_malformed_conversations(
    fake: FakeAnthropicAPI, messages: Any, problem: str
) -> None:
    fake.queue_text("Still queued.")
    async with anthropic.AsyncAnthropic(
        api_key=API_KEY, base_url=fake.base_url, max_retries=0
    ) as client:
        with pytest.raises(anthropic.BadRequestError, match=problem) as raised:
            await client.messages.create(model="m", max_tokens=10, messages=messages)
        valid: Any = [{"role": "user", "content": "hi"}]
        reply = await client.messages.create(model="m", max_tokens=10, messages=valid)

    assert raised.value.type == "invalid_request_error"
    assert reply.content[0].type == "text"
    assert reply.content[0].text == "Still queued."  # a refused request leaves the script alone


async def test_the_fake_answers_from_a_responder_when_nothing_is_queued(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    fake.responder = lambda body: f"You said: {body['messages'][-1]['content']}"
    fake.queue_text("Scripted first.")

    first = await llm.complete(ask("one"))
    second = await llm.complete(ask("two"))

    assert (first.text, second.text) == ("Scripted first.", "You said: two")
