"""`OpenAILLM` and the OpenAI-compatible embedder through the real `openai` SDK against
the loopback fake of an Ollama-like `/v1` (and a cloud router's errors)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
import structlog
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bot.bootstrap import build_core, build_embedder_from, build_llm
from bot.config import Settings, is_local_url
from bot.domain import IncomingMessage
from bot.errors import ConfigurationError, LLMBadOutput, LLMTruncated, LLMUnavailable
from bot.llm import CONVERSATION_START, LLMRequest, ToolCall, ToolResult, ToolSpec, Turn
from bot.llm_tools import LLMToolCaller
from bot.openai_llm import OpenAILLM
from memory.recall.embedder_identity import check_embedder, column_width
from memory.recall.embeddings import (
    EmbeddingRejected,
    EmbeddingUnavailable,
    RecentEmbeddings,
)
from memory.recall.minilm import MiniLMEmbedder
from memory.recall.openai_embeddings import OpenAICompatibleEmbedder
from memory.recall.reembed import reembed
from memory.store.conversations import SqlConversationStore
from memory.store.errors import AnswerTruncated, EmbedderMismatch
from memory.store.tables import Message
from tests.conftest import FakeClock
from tests.fakes.openai_api import FakeOpenAIAPI, ModelTraits, TextReply
from tests.support.timezone_question import plain

BACKOFF = 0.01
MAX_RETRY_AFTER = 5.0
PERSONA = "You are Mira, a warm companion. " * 20
CHAT, FAST = "llama3.1:8b", "qwen2.5:3b"
NO_TOOLS, PLAIN = "gemma2:2b", "tinyllama"  # no tools; neither tools nor response_format
REMEMBER = ToolSpec(
    name="remember",
    description="Save a fact about the person.",
    input_schema={
        "type": "object",
        "properties": {
            "fact": {"type": "string"},
            "importance": {"type": "integer"},
        },
        "required": ["fact"],
    },
)
MODELS = {
    CHAT: ModelTraits(),
    FAST: ModelTraits(),
    NO_TOOLS: ModelTraits(tools=False),
    PLAIN: ModelTraits(tools=False, response_format=False),
    "o4-mini": ModelTraits(max_tokens=False),
    "nomic-embed-text": ModelTraits(embedding_dimensions=False),
    "text-embedding-3-small": ModelTraits(embedding_dim=1536),
}


class RecordedSleeps(list[float]):
    """Stands in for `asyncio.sleep`: records each backoff instead of waiting."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAIAPI]:
    """The fake server, serving `MODELS`, any key accepted (a local server)."""
    async with FakeOpenAIAPI(models=dict(MODELS)) as api:
        yield api


@pytest.fixture
def sleeps() -> RecordedSleeps:
    """The backoffs the client asked for."""
    return RecordedSleeps()


@pytest.fixture
async def llm(fake: FakeOpenAIAPI, sleeps: RecordedSleeps) -> AsyncIterator[OpenAILLM]:
    """The client under test, pointed at the fake, with three retries."""
    client = make_llm(fake.base_url, sleeps)
    yield client
    await client.aclose()


def make_llm(base_url: str, sleep: RecordedSleeps, **overrides: Any) -> OpenAILLM:
    """A client with a short timeout and tiny backoff."""
    options: dict[str, Any] = {
        "base_url": base_url,
        "api_key": None,
        "chat_model": CHAT,
        "fast_model": FAST,
        "timeout_seconds": 0.5,
        "max_retries": 3,
        "backoff_seconds": BACKOFF,
        "max_retry_after_seconds": MAX_RETRY_AFTER,
        "sleep": sleep,
        **overrides,
    }
    return OpenAILLM(**options)


def ask(text: str = "How are you?", **fields: Any) -> LLMRequest:
    """A chat request with the persona as the stable system prompt."""
    fields.setdefault("role", "chat")
    return LLMRequest(stable_system=PERSONA, turns=(Turn("user", text),), **fields)


def forced(role: Any = "fast", **fields: Any) -> LLMRequest:
    """A request that must answer through `remember`."""
    return ask("I love green tea", role=role, tools=(REMEMBER,), force_tool="remember", **fields)


# Answers


async def test_a_streamed_reply_comes_back_whole_with_usage(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    fake.queue_text("Doing well, thanks for asking! And you?")

    completion = await llm.complete(ask(dynamic_system="It is Monday."))

    assert completion.text == "Doing well, thanks for asking! And you?"
    assert (completion.model, completion.stop_reason, completion.tool_calls) == (
        CHAT,
        "end_turn",
        (),
    )
    assert completion.usage.input_tokens > 0 and completion.usage.output_tokens > 0
    body = fake.last_request
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 1024
    assert body["messages"] == [
        {"role": "system", "content": f"{PERSONA}\n\nIt is Monday."},
        {"role": "user", "content": "How are you?"},
    ]


async def test_cached_prompt_tokens_are_reported_as_cache_reads(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    first = await llm.complete(ask())
    second = await llm.complete(ask())

    assert first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens > 0
    total = first.usage.input_tokens + first.usage.cache_read_tokens
    assert second.usage.input_tokens + second.usage.cache_read_tokens == total


async def test_the_role_picks_the_model(llm: OpenAILLM, fake: FakeOpenAIAPI) -> None:
    await llm.complete(ask(role="fast"))
    assert fake.last_request["model"] == FAST
    await llm.complete(ask(role="chat"))
    assert fake.last_request["model"] == CHAT


async def test_a_reply_cut_at_max_tokens_is_still_an_answer(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    fake.queue_text("Well, it all started", finish_reason="length")

    completion = await llm.complete(ask(max_tokens=5))

    assert (completion.text, completion.stop_reason) == ("Well, it all started", "max_tokens")


async def test_turns_are_merged_to_alternate_and_start_with_the_user(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    turns = (
        Turn("assistant", "Morning! How did the interview go?"),
        Turn("user", "It went well."),
        Turn("user", "They call back Friday."),
        Turn("assistant", "That's great."),
        Turn("user", "Thanks"),
    )

    await llm.complete(LLMRequest(role="chat", stable_system=PERSONA, turns=turns))

    assert fake.last_request["messages"][1:] == [
        {"role": "user", "content": CONVERSATION_START},
        {"role": "assistant", "content": "Morning! How did the interview go?"},
        {"role": "user", "content": "It went well.\n\nThey call back Friday."},
        {"role": "assistant", "content": "That's great."},
        {"role": "user", "content": "Thanks"},
    ]


async def test_a_model_that_takes_only_max_completion_tokens_gets_it_from_then_on(
    fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    llm = make_llm(fake.base_url, sleeps, chat_model="o4-mini")

    await llm.complete(ask(max_tokens=300))
    await llm.complete(ask(max_tokens=300))
    await llm.aclose()

    limits = [(b.get("max_tokens"), b.get("max_completion_tokens")) for b in fake.requests]
    assert limits == [(300, None), (None, 300), (None, 300)]
    assert sleeps == []


async def test_a_slow_first_token_within_the_timeout_is_waited_for(
    llm: OpenAILLM, fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    fake.queue_slow_first_token(0.3, TextReply("Sorry, thinking."))

    completion = await llm.complete(ask())

    assert completion.text == "Sorry, thinking."
    assert (len(fake.requests), sleeps) == (1, [])


async def test_a_first_token_slower_than_the_timeout_is_retried(
    llm: OpenAILLM, fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    fake.queue_slow_first_token(3.0)
    fake.queue_text("Here now.")

    completion = await llm.complete(ask())

    assert completion.text == "Here now."
    assert len(fake.requests) == 2 and len(sleeps) == 1


# Tools in the conversation


async def test_a_tool_exchange_goes_back_as_tool_calls_and_tool_messages(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    fake.queue_tool_call("remember", {"fact": "has a cat"}, text="Noted.")
    fake.queue_text("I'll remember your cat.")
    first = await llm.complete(ask("I have a cat", tools=(REMEMBER,)))
    [call] = first.tool_calls
    assert (call.name, call.input, first.stop_reason) == (
        "remember",
        {"fact": "has a cat"},
        "tool_use",
    )
    assert first.text == "Noted."
    assert fake.last_request["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "remember",
                "description": REMEMBER.description,
                "parameters": REMEMBER.input_schema,
            },
        }
    ]
    assert "tool_choice" not in fake.last_request

    exchange = ((first.tool_calls, (ToolResult(call.id, "saved"),)),)
    second = await llm.complete(ask("I have a cat", tools=(REMEMBER,), tool_exchange=exchange))

    assert second.text == "I'll remember your cat."
    assert fake.last_request["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "remember", "arguments": json.dumps(call.input)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "saved"},
    ]


async def test_a_model_without_tools_chats_without_them_and_is_not_offered_them_again(
    fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    llm = make_llm(fake.base_url, sleeps, chat_model=NO_TOOLS)

    first = await llm.complete(ask(tools=(REMEMBER,)))
    second = await llm.complete(ask(tools=(REMEMBER,)))
    await llm.aclose()

    assert (first.text, second.text) == ("Hello from the fake model.",) * 2
    assert ["tools" in body for body in fake.requests] == [True, False, False]
    assert sleeps == []


# Forced tool answers: tools, then a JSON schema, then JSON in text


async def test_a_forced_tool_call_is_asked_by_name_and_validated(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    fake.queue_tool_call("remember", {"fact": "likes green tea", "importance": 6})

    completion = await llm.complete(forced())

    assert fake.last_request["tool_choice"] == {
        "type": "function",
        "function": {"name": "remember"},
    }
    [call] = completion.tool_calls
    assert (call.name, call.input) == ("remember", {"fact": "likes green tea", "importance": 6})
    assert completion.stop_reason == "tool_use"
    assert llm.structured_mode(FAST) == "tools"


async def test_a_tool_input_that_does_not_fit_is_repaired_once(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    fake.queue_tool_call("remember", {"importance": "high"})
    fake.queue_tool_call("remember", {"fact": "likes green tea", "importance": 7})

    completion = await llm.complete(forced())

    assert completion.tool_calls[0].input == {"fact": "likes green tea", "importance": 7}
    repair = fake.last_request["messages"]
    assert repair[-2]["tool_calls"][0]["function"]["arguments"] == '{"importance": "high"}'
    assert repair[-1]["role"] == "tool"
    assert "$.fact: is required" in repair[-1]["content"]
    assert "$.importance: must be an integer" in repair[-1]["content"]


async def test_an_answer_that_still_does_not_fit_is_bad_output_never_half_used(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    fake.queue_tool_call("remember", {"importance": 3})
    fake.queue_tool_call("remember", '{"fact": "likes gre')

    with pytest.raises(LLMBadOutput, match="not valid JSON"):
        await llm.complete(forced())
    assert len(fake.requests) == 2


async def test_a_model_that_ignores_tool_choice_and_writes_json_is_understood(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    fake.queue_text('Sure! ```json\n{"fact": "likes green tea"}\n```')

    completion = await llm.complete(forced())

    assert completion.tool_calls[0].input == {"fact": "likes green tea"}


async def test_a_forced_answer_cut_off_at_max_tokens_is_truncated_not_repaired(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    fake.queue_tool_call("remember", '{"fact": "likes gr', finish_reason="length")

    with pytest.raises(LLMTruncated, match="max_tokens"):
        await llm.complete(forced())
    assert len(fake.requests) == 1


async def test_without_tools_the_json_schema_is_asked_for_and_remembered(
    fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    llm = make_llm(fake.base_url, sleeps, fast_model=NO_TOOLS)
    fake.queue_tool_call("remember", {"fact": "likes green tea"})
    fake.queue_tool_call("remember", {"fact": "has a cat"})

    first = await llm.complete(forced())
    second = await llm.complete(forced())
    await llm.aclose()

    assert [c.tool_calls[0].input["fact"] for c in (first, second)] == [
        "likes green tea",
        "has a cat",
    ]
    assert ["tools" in b for b in fake.requests] == [True, False, False]
    schema_request = fake.requests[1]
    assert schema_request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "remember", "schema": REMEMBER.input_schema, "strict": True},
    }
    assert json.dumps(REMEMBER.input_schema, separators=(",", ":")) in str(
        schema_request["messages"][0]["content"]
    )
    assert llm.structured_mode(NO_TOOLS) == "json_schema"
    assert sleeps == []


async def test_without_tools_or_response_format_json_in_text_with_one_repair(
    fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    llm = make_llm(fake.base_url, sleeps, fast_model=PLAIN)
    fake.queue_text("I think they like tea.")
    fake.queue_text('{"fact": "likes green tea"}')

    completion = await llm.complete(forced())
    fake.queue_text('{"fact": "has a cat"}')
    again = await llm.complete(forced())
    await llm.aclose()

    assert completion.tool_calls[0].input == {"fact": "likes green tea"}
    assert again.tool_calls[0].input == {"fact": "has a cat"}
    kinds = [("tools" in b, "response_format" in b) for b in fake.requests]
    assert kinds == [(True, False), (False, True), (False, False), (False, False), (False, False)]
    repair = fake.requests[3]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "I think they like tea."}
    assert "no JSON object" in repair[-1]["content"]
    assert llm.structured_mode(PLAIN) == "json_text"


async def test_json_in_text_that_never_fits_is_bad_output(
    fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    llm = make_llm(fake.base_url, sleeps, fast_model=PLAIN)
    fake.queue_text('{"fact": 42}')
    fake.queue_text('{"fact": ["tea"]}')

    with pytest.raises(LLMBadOutput, match=r"\$\.fact: must be a string"):
        await llm.complete(forced())
    await llm.aclose()


async def test_the_tool_caller_works_in_every_mode_and_reports_cut_off_answers(
    fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    call = {
        "system": "Record facts.",
        "prompt": "I like green tea",
        "tool_name": "remember",
        "tool_description": REMEMBER.description,
        "input_schema": REMEMBER.input_schema,
    }
    for model in (FAST, NO_TOOLS, PLAIN):
        llm = make_llm(fake.base_url, sleeps, fast_model=model)
        caller = LLMToolCaller(llm, max_tokens=300)
        fake.queue_tool_call("remember", {"fact": "likes green tea"})
        assert await caller.call_tool(**call) == {"fact": "likes green tea"}
        fake.queue_tool_call("remember", '{"fact": "lik', finish_reason="length")
        with pytest.raises(AnswerTruncated):
            await caller.call_tool(**call)
        assert fake.last_request["max_tokens"] == 300
        await llm.aclose()


# Retries and errors


@pytest.mark.parametrize(("retry_after", "waited"), [(2, 2.0), (600, MAX_RETRY_AFTER)])
async def test_a_rate_limit_waits_for_retry_after_then_succeeds(
    llm: OpenAILLM,
    fake: FakeOpenAIAPI,
    sleeps: RecordedSleeps,
    retry_after: float,
    waited: float,
) -> None:
    fake.queue_error(429, "Rate limit reached", retry_after=retry_after)
    fake.queue_text("Back again.")

    completion = await llm.complete(ask())

    assert completion.text == "Back again."
    assert sleeps == [waited]


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_a_server_error_is_retried_with_backoff(
    llm: OpenAILLM, fake: FakeOpenAIAPI, sleeps: RecordedSleeps, status: int
) -> None:
    fake.queue_error(status)
    fake.queue_text("Here now.")

    completion = await llm.complete(ask())

    assert completion.text == "Here now."
    [slept] = sleeps
    assert BACKOFF / 2 <= slept <= BACKOFF


async def test_when_every_attempt_fails_the_model_is_unavailable(
    llm: OpenAILLM, fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    for _ in range(4):
        fake.queue_error(503)

    with pytest.raises(LLMUnavailable, match="503") as raised:
        await llm.complete(ask())

    assert isinstance(raised.value.__cause__, openai.APIStatusError)
    assert (len(fake.requests), len(sleeps)) == (4, 3)


async def test_an_unreachable_server_is_unavailable_after_retries(sleeps: RecordedSleeps) -> None:
    async with FakeOpenAIAPI() as gone:
        base_url = gone.base_url
    llm = make_llm(base_url, sleeps, max_retries=1)

    with pytest.raises(LLMUnavailable, match="unreachable"):
        await llm.complete(ask())
    await llm.aclose()

    assert len(sleeps) == 1


async def test_an_unknown_model_is_named_and_not_retried(
    fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    llm = make_llm(fake.base_url, sleeps, chat_model="llama9:70b")

    with pytest.raises(LLMUnavailable, match=r"'llama9:70b' not found.*COMPANION_CHAT_MODEL"):
        await llm.complete(ask())
    with pytest.raises(LLMUnavailable, match="llama9:70b"):
        await llm.complete(ask(tools=(REMEMBER,), force_tool="remember"))
    await llm.aclose()

    assert (len(fake.requests), sleeps) == (2, [])


async def test_a_bad_request_is_not_retried_nor_taken_for_missing_support(
    llm: OpenAILLM, fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    fake.queue_error(400, "messages: something is off")

    with pytest.raises(LLMUnavailable, match="400"):
        await llm.complete(forced())

    assert (len(fake.requests), sleeps) == (1, [])
    assert llm.structured_mode(FAST) == "tools"


async def test_a_wrong_key_is_not_retried(sleeps: RecordedSleeps) -> None:
    async with FakeOpenAIAPI(api_key="sk-right") as cloud:
        llm = make_llm(cloud.base_url, sleeps, api_key="sk-wrong")
        with pytest.raises(LLMUnavailable, match="401"):
            await llm.complete(ask())
        await llm.aclose()
        assert cloud.request_headers[-1]["Authorization"] == "Bearer sk-wrong"
    assert sleeps == []


async def test_logs_carry_counts_but_never_prompt_text_or_the_key(
    fake: FakeOpenAIAPI, sleeps: RecordedSleeps
) -> None:
    llm = make_llm(fake.base_url, sleeps, api_key="sk-secret-key")
    fake.queue_error(429, retry_after=1)
    fake.queue_text("A private reply.")

    with structlog.testing.capture_logs() as logs:
        await llm.complete(ask("my private diagnosis", dynamic_system="secret memory"))
    await llm.aclose()

    assert [entry["event"] for entry in logs] == ["llm.retry", "llm.completed"]
    dumped = repr(logs)
    for secret in ("my private diagnosis", "secret memory", "A private reply", "sk-secret"):
        assert secret not in dumped


# Settings and wiring


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8000/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://host.docker.internal:11434/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("http://192.168.1.20:1234/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://172.20.0.3:8000/v1", True),
        ("https://openrouter.ai/api/v1", False),
        ("http://8.8.8.8/v1", False),
        ("http://172.32.0.1/v1", False),
        ("https://localhost.example.com/v1", False),
        (None, False),
    ],
)
def test_which_addresses_count_as_local(url: str | None, local: bool) -> None:
    assert is_local_url(url) is local


def test_a_local_server_needs_no_key_and_the_fast_model_defaults_to_the_chat_model() -> None:
    settings = Settings(
        llm_provider="openai", openai_base_url="http://localhost:11434/v1", chat_model=CHAT
    )

    llm = build_llm(settings)

    assert isinstance(llm, OpenAILLM)
    assert settings.has_llm
    assert settings.openai_fast_model == CHAT


def test_a_public_server_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("COMPANION_LLM_PROVIDER", "openai")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://openrouter.ai/api/v1")
    monkeypatch.setenv("COMPANION_CHAT_MODEL", "meta-llama/llama-3.1-8b-instruct")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]

    with pytest.raises(ConfigurationError, match=r"OPENAI_API_KEY is not set.*openrouter"):
        build_llm(settings)
    assert not settings.has_llm

    monkeypatch.setenv("OPENAI_API_KEY", "sk-or-test")
    assert isinstance(build_llm(Settings(_env_file=None)), OpenAILLM)  # type: ignore[call-arg]


def test_the_openai_provider_needs_a_chat_model_but_anthropic_settings_are_not_asked() -> None:
    settings = Settings(llm_provider="openai", openai_base_url="http://localhost:11434/v1")

    with pytest.raises(ConfigurationError, match="COMPANION_CHAT_MODEL is not set"):
        build_llm(settings)
    assert settings.anthropic_api_key is None


async def test_a_conversation_turn_runs_through_the_core_on_the_openai_provider(
    fake: FakeOpenAIAPI,
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        llm_provider="openai",
        openai_base_url=fake.base_url,
        chat_model=CHAT,
        fast_model=NO_TOOLS,
    )
    core = await build_core(settings, llm=build_llm(settings), clock=clock)
    fake.responder = lambda body: f"Nice to meet you! ({len(body['messages'])} messages)"
    try:
        reply = await core.router.handle(
            IncomingMessage("console", "alice", "Hi, I'm Alice", chat_id="c-alice")
        )
    finally:
        await core.aclose()

    assert reply.text.startswith("Nice to meet you!")
    chat = [body for body in fake.requests if body["model"] == CHAT]
    assert chat and "Hi, I'm Alice" in json.dumps(chat[0]["messages"])
    async with db() as session:
        stored = (await session.scalars(select(Message.content).order_by(Message.id))).all()
    assert list(stored) == ["Hi, I'm Alice", plain(reply.text)]  # the model's own words


# Embeddings


async def test_the_embedder_returns_unit_rows_of_the_configured_width(
    fake: FakeOpenAIAPI,
) -> None:
    embedder = OpenAICompatibleEmbedder("nomic-embed-text", 768, fake.base_url)

    rows = await embedder.embed(["I love green tea", "my cat Miso", "I love green tea"])
    await embedder.aclose()

    assert rows.shape == (3, 768) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert np.allclose(rows[0], rows[2]) and not np.allclose(rows[0], rows[1])
    assert embedder.name == "openai-nomic-embed-text-768"
    assert "dimensions" not in fake.embedding_requests[-1]


async def test_the_embedder_asks_for_dimensions_when_the_width_differs(
    fake: FakeOpenAIAPI,
) -> None:
    embedder = OpenAICompatibleEmbedder("text-embedding-3-small", 256, fake.base_url)

    rows = await embedder.embed(["one"])
    await embedder.embed(["two"])
    await embedder.aclose()

    assert rows.shape == (1, 256)
    sent = [body.get("dimensions") for body in fake.embedding_requests]
    assert sent == [None, 256, 256]


async def test_a_width_the_model_cannot_give_is_rejected_with_the_setting_to_change(
    fake: FakeOpenAIAPI,
) -> None:
    embedder = OpenAICompatibleEmbedder("nomic-embed-text", 256, fake.base_url)

    with pytest.raises(EmbeddingRejected, match="COMPANION_EMBEDDING_DIM=768"):
        await embedder.embed(["one"])
    await embedder.aclose()


async def test_embedding_errors_are_translated(fake: FakeOpenAIAPI) -> None:
    unknown = OpenAICompatibleEmbedder("mxbai-embed", 768, fake.base_url)
    with pytest.raises(EmbeddingRejected, match="COMPANION_OPENAI_EMBEDDING_MODEL"):
        await unknown.embed(["x"])
    await unknown.aclose()

    embedder = OpenAICompatibleEmbedder("nomic-embed-text", 768, fake.base_url)
    fake.queue_error(503)
    with pytest.raises(EmbeddingUnavailable, match="503"):
        await embedder.embed(["x"])
    await embedder.aclose()


def test_the_embedding_provider_setting_builds_it() -> None:
    settings = Settings(
        embedding_provider="openai",
        embedding_dim=768,
        openai_base_url="http://localhost:11434/v1",
    )

    embedder = build_embedder_from(settings)

    assert isinstance(embedder, RecentEmbeddings)
    assert (embedder.name, embedder.dim) == ("openai-nomic-embed-text-768", 768)


async def test_tool_call_ids_round_trip_when_a_tool_result_follows(
    llm: OpenAILLM, fake: FakeOpenAIAPI
) -> None:
    call = ToolCall("call_1", "remember", {"fact": "has a cat"})
    exchange = (((call,), (ToolResult("call_1", "saved"),)),)
    turns = (Turn("user", "I have a cat"), Turn("assistant", "Let me note that."))

    await llm.complete(
        LLMRequest(role="chat", stable_system=PERSONA, turns=turns, tool_exchange=exchange)
    )

    said = fake.last_request["messages"][2]
    assert said["content"] == "Let me note that."
    assert said["tool_calls"][0]["id"] == "call_1"


@pytest.fixture
async def restore_width(engine: AsyncEngine) -> AsyncIterator[None]:
    """Put the vector columns back to the session's width (384) afterwards, and forget
    the embedder re-embedding recorded."""
    yield
    async with engine.begin() as conn:
        for table in ("messages", "memories"):
            await conn.exec_driver_sql(
                f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector(384) USING NULL"
            )
        await conn.exec_driver_sql("DELETE FROM embedder_identity")


async def test_switching_to_the_openai_embedder_needs_and_gets_a_reembed(
    fake: FakeOpenAIAPI,
    db: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    restore_width: None,
) -> None:
    old = MiniLMEmbedder()
    await check_embedder(db, old)
    store = SqlConversationStore(db, old)
    for i, line in enumerate(["I adopted a kitten", "The kitten is called Miso"]):
        await store.record_inbound(
            platform="console",
            platform_user_id="alice",
            chat_id="c",
            display_name="Alice",
            text=line,
            platform_message_id=str(i),
            now=clock.now() + timedelta(seconds=i),
            idle_gap=timedelta(minutes=30),
        )
    new = OpenAICompatibleEmbedder("nomic-embed-text", 768, fake.base_url)

    with pytest.raises(EmbedderMismatch):
        await check_embedder(db, new)
    count = await reembed(db, new, batch_size=1)
    spec = await check_embedder(db, new)
    await new.aclose()

    assert count == 2
    assert (spec.name, spec.dim) == ("openai-nomic-embed-text-768", 768)
    async with db() as session:
        assert await column_width(session, "messages") == 768
    embedded = [body["input"] for body in fake.embedding_requests]
    assert embedded == [["I adopted a kitten"], ["The kitten is called Miso"]]
