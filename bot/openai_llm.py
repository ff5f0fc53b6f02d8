"""The `LLM` port on any OpenAI-compatible Chat Completions API (OpenAI, OpenRouter,
Ollama, vLLM, LM Studio, llama.cpp's server), through the official `openai` SDK.

Answers are streamed and put back together, so a long answer from a slow local model
is never cut by the timeout, which bounds the wait for each piece (the first token
included). The SDK's own retries are off: this module retries 429 (after `retry-after`),
408, 5xx, timeouts and dropped connections with backoff, and translates every SDK error
into `LLMUnavailable` at the edge. Forced tool calls go through `bot.openai_structured`,
which falls back to a JSON schema or JSON in text on servers without tool support.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import structlog
from openai import (
    APIConnectionError,
    APIStatusError,
    AsyncOpenAI,
    AsyncStream,
    NotFoundError,
    OpenAIError,
)
from openai.types.chat import ChatCompletionChunk

from bot.errors import LLMBadOutput, LLMTruncated, LLMUnavailable
from bot.llm import Completion, LLMRequest, ToolCall, ToolSpec, Usage
from bot.openai_messages import Message, StreamedAnswer, build_messages, build_tools
from bot.openai_structured import (
    NEXT_MODE,
    FeatureRefused,
    Mode,
    instruction,
    parse_answer,
    refused,
    repair_messages,
    structured_options,
)
from bot.retrying import RetryPolicy, Sleep, record_completion, wait_or_give_up

log = structlog.get_logger(__name__)

NO_KEY = "no-key"
"""Sent as the bearer token to a local server that needs none (the SDK insists on one)."""

GARBLED = (ValueError, TypeError, AttributeError, KeyError)


def _stream_breaks() -> tuple[type[Exception], ...]:
    """Transport errors that openai releases before 3.0 let through from a broken stream
    (later ones wrap them in `APIConnectionError`)."""
    try:
        import httpx
    except ImportError:  # pragma: no cover - an SDK without httpx wraps its own errors
        return ()
    return (httpx.TransportError,)


STREAM_BREAKS = _stream_breaks()
NETWORK: tuple[type[Exception], ...] = (OpenAIError, *STREAM_BREAKS, *GARBLED)
"""What one attempt may raise: SDK errors, a stream broken off mid-way, a garbled body."""


class OpenAILLM:
    """An OpenAI-compatible Chat Completions API behind the `LLM` port."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        chat_model: str,
        fast_model: str,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 8.0,
        max_retry_after_seconds: float = 30.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._client = AsyncOpenAI(
            api_key=api_key or NO_KEY, base_url=base_url, timeout=timeout_seconds, max_retries=0
        )
        self._models = {"chat": chat_model, "fast": fast_model}
        self._modes: dict[str, Mode] = {}
        self._without_tools: set[str] = set()
        self._completion_tokens: set[str] = set()
        self._retry = RetryPolicy(
            max_retries, backoff_seconds, max_backoff_seconds, max_retry_after_seconds
        )
        self._sleep = sleep

    def structured_mode(self, model: str) -> Mode:
        """How forced tool answers are asked of `model` (learned per process)."""
        return self._modes.get(model, "tools")

    async def complete(self, request: LLMRequest) -> Completion:
        """Ask the model, retrying transient failures; `LLMUnavailable` when it cannot."""
        model = self._models[request.role]
        started = time.monotonic()
        if request.force_tool is None:
            completion = await self._chat(request, model)
        else:
            completion = await self._forced(request, model, _forced_spec(request))
        elapsed = time.monotonic() - started
        record_completion(
            completion,
            role=request.role,
            elapsed=elapsed,
            structured_mode=self.structured_mode(model) if request.force_tool else None,
        )
        return completion

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    # Plain answers (the conversation), with tools offered when the model takes them

    async def _chat(self, request: LLMRequest, model: str) -> Completion:
        messages = build_messages(request)
        if request.tools and model not in self._without_tools:
            options = {"tools": build_tools(request.tools)}
            try:
                answer = await self._attempts(model, messages, request.max_tokens, options, "tools")
                return answer.completion()
            except FeatureRefused:
                self._without_tools.add(model)
                log.warning("llm.tools_unsupported", model=model, fallback="no tools")
        answer = await self._attempts(model, messages, request.max_tokens, {}, None)
        return answer.completion()

    # Forced tool answers: tools, else a JSON schema, else JSON in text; one repair

    async def _forced(self, request: LLMRequest, model: str, tool: ToolSpec) -> Completion:
        while True:
            mode = self.structured_mode(model)
            try:
                return await self._forced_in(mode, request, model, tool)
            except FeatureRefused:
                self._modes[model] = NEXT_MODE[mode]
                log.warning(
                    "llm.structured_fallback", model=model, refused=mode, now=NEXT_MODE[mode]
                )

    async def _forced_in(
        self, mode: Mode, request: LLMRequest, model: str, tool: ToolSpec
    ) -> Completion:
        extra = "" if mode == "tools" else instruction(tool)
        messages = build_messages(request, extra_system=extra)
        options = structured_options(mode, request, tool)
        refusable = mode if mode in NEXT_MODE else None
        usage = Usage()
        for attempt in range(2):
            answer = await self._attempts(model, messages, request.max_tokens, options, refusable)
            usage = _add(usage, answer.usage)
            if answer.finish_reason == "length":
                raise LLMTruncated(f"tool {tool.name!r} answer stopped at max_tokens")
            parsed, call_id, arguments = parse_answer(answer, tool)
            if parsed.value is not None:
                call = ToolCall(call_id or f"call_{uuid.uuid4().hex[:12]}", tool.name, parsed.value)
                return Completion("", answer.model, usage, (call,), "tool_use")
            log.warning("llm.structured_invalid", model=model, mode=mode, attempt=attempt + 1)
            messages = [*messages, *repair_messages(parsed, call_id, arguments, answer, tool)]
        raise LLMBadOutput(f"tool {tool.name!r} answer does not fit its schema: {parsed.problem}")

    # One request with retries

    async def _attempts(
        self,
        model: str,
        messages: list[Message],
        max_tokens: int,
        options: dict[str, Any],
        refusable: Mode | None,
    ) -> StreamedAnswer:
        attempt = 0
        while True:
            try:
                return await self._stream(model, messages, max_tokens, options)
            except NETWORK as exc:
                if refusable is not None and refused(exc, refusable):
                    raise FeatureRefused(refusable, str(exc)) from exc
                if model not in self._completion_tokens and wants_completion_tokens(exc):
                    # OpenAI's reasoning models take only the newer name of the limit.
                    self._completion_tokens.add(model)
                    log.info("llm.limit_parameter", model=model, name="max_completion_tokens")
                    continue
                attempt += 1
                delay = self._delay_or_raise(exc, attempt, model)
            await self._sleep(delay)

    async def _stream(
        self, model: str, messages: list[Message], max_tokens: int, options: dict[str, Any]
    ) -> StreamedAnswer:
        # Our messages and options are plain dicts in the API's shape (typed against the
        # SDK's TypedDicts they would tie this module to one SDK release's type names).
        create: Any = self._client.chat.completions.create
        limit = "max_completion_tokens" if model in self._completion_tokens else "max_tokens"
        stream: AsyncStream[ChatCompletionChunk] = await create(
            model=model,
            messages=messages,
            **{limit: max_tokens},
            stream=True,
            stream_options={"include_usage": True},
            **options,
        )
        answer = StreamedAnswer(model)
        async with stream:
            async for chunk in stream:
                answer.add(chunk)
        return answer

    def _delay_or_raise(self, exc: Exception, attempt: int, model: str) -> float:
        """How long to wait before attempt `attempt + 1`; raises ours when giving up."""
        if isinstance(exc, GARBLED):
            delay = self._retry.delay(attempt - 1, retryable=True)
            status: int | str = "malformed"
            error: LLMUnavailable = LLMBadOutput(f"malformed answer: {type(exc).__name__}")
        else:
            delay = self._retry.delay(
                attempt - 1, retryable=is_retryable(exc), retry_after=_retry_after(exc)
            )
            status = _status(exc)
            error = LLMUnavailable(_describe(exc, model))
        return wait_or_give_up(
            delay, error=error, cause=exc, attempt=attempt, model=model, status=status
        )


def _retry_after(exc: Exception) -> str | None:
    """The `retry-after` header the server sent with an error status, if any."""
    return exc.response.headers.get("retry-after") if isinstance(exc, APIStatusError) else None


def is_retryable(exc: Exception) -> bool:
    """Whether another attempt may succeed: rate limits, 5xx, network, timeouts."""
    if isinstance(exc, APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, (APIConnectionError, *STREAM_BREAKS))


def wants_completion_tokens(exc: Exception) -> bool:
    """Whether the server refused `max_tokens` and asks for `max_completion_tokens`."""
    return (
        isinstance(exc, APIStatusError)
        and exc.status_code == 400
        and "max_completion_tokens" in exc.message
    )


def _forced_spec(request: LLMRequest) -> ToolSpec:
    for tool in request.tools:
        if tool.name == request.force_tool:
            return tool
    raise LLMBadOutput(f"forced tool {request.force_tool!r} is not among the request's tools")


def _add(total: Usage, more: Usage) -> Usage:
    return Usage(
        input_tokens=total.input_tokens + more.input_tokens,
        output_tokens=total.output_tokens + more.output_tokens,
        cache_read_tokens=total.cache_read_tokens + more.cache_read_tokens,
        cache_write_tokens=total.cache_write_tokens + more.cache_write_tokens,
    )


def _status(exc: Exception) -> int | str:
    if isinstance(exc, APIStatusError):
        return exc.status_code
    return type(exc).__name__


def _describe(exc: Exception, model: str) -> str:
    """A short cause: the status and the server's own words; an unknown model by name."""
    if isinstance(exc, NotFoundError):
        return (
            f"model {model!r} not found at the OpenAI-compatible server (HTTP 404): check "
            f"COMPANION_CHAT_MODEL / COMPANION_FAST_MODEL (for Ollama: `ollama pull {model}`)"
        )
    if isinstance(exc, APIStatusError):
        detail = exc.message[:200]
        return f"OpenAI-compatible API error {exc.status_code}: {detail}"
    return f"OpenAI-compatible API unreachable: {type(exc).__name__}"
