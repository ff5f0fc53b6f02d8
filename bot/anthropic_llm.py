"""The `LLM` port on Anthropic's Messages API, with prompt caching and explicit retries.

Prompt caching: breakpoints end the persona (with the tools before it), the standing
memory, and the history before the last user turn — at most 3 of the API's 4. What
changes every turn comes after them, in the last user turn.

The SDK's own retries are off: this module decides what to retry (429, 408, 5xx, 529,
connection errors, timeouts), how long to wait, and translates every SDK error into
`LLMUnavailable` at the edge.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from anthropic import AnthropicError, APIConnectionError, APIStatusError, AsyncAnthropic, omit
from anthropic.types import (
    CacheControlEphemeralParam,
    ContentBlockParam,
    Message,
    MessageParam,
    TextBlock,
    TextBlockParam,
    ToolChoiceToolParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
)

from bot.errors import LLMBadOutput, LLMTruncated, LLMUnavailable
from bot.llm import (
    Completion,
    LLMRequest,
    ToolCall,
    ToolResult,
    Turn,
    Usage,
    last_user_index,
    merge_turns,
)
from bot.retrying import RetryPolicy, Sleep, record_completion, wait_or_give_up

log = structlog.get_logger(__name__)


GARBLED = (ValueError, TypeError, AttributeError, KeyError)
"""What parsing a truncated or malformed response body raises (JSON errors are ValueErrors)."""

EPHEMERAL: CacheControlEphemeralParam = {"type": "ephemeral"}
"""A cache breakpoint with the default 5-minute lifetime (a conversation's turns come
minutes apart; the 1-hour one costs twice as much to write)."""


class AnthropicLLM:
    """The Anthropic Messages API behind the `LLM` port."""

    def __init__(
        self,
        *,
        api_key: str,
        chat_model: str,
        fast_model: str,
        base_url: str | None = None,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 8.0,
        max_retry_after_seconds: float = 30.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._client = AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=0
        )
        self._models = {"chat": chat_model, "fast": fast_model}
        self._retry = RetryPolicy(
            max_retries, backoff_seconds, max_backoff_seconds, max_retry_after_seconds
        )
        self._sleep = sleep

    async def complete(self, request: LLMRequest) -> Completion:
        """Ask the model, retrying transient failures; `LLMUnavailable` when it cannot."""
        model = self._models[request.role]
        started = time.monotonic()
        completion = await self._with_retries(lambda: self._send(request, model), model)
        _check_forced_tool(request, completion)
        elapsed = time.monotonic() - started
        record_completion(
            completion,
            role=request.role,
            elapsed=elapsed,
            cache_write_tokens=completion.usage.cache_write_tokens,
        )
        return completion

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def _send(self, request: LLMRequest, model: str) -> Completion:
        tool_choice: ToolChoiceToolParam | None = (
            {"type": "tool", "name": request.force_tool} if request.force_tool else None
        )
        message = await self._client.messages.create(
            model=model,
            max_tokens=request.max_tokens,
            system=build_system(request),
            messages=build_messages(request),
            tools=build_tools(request) or omit,
            tool_choice=tool_choice or omit,
        )
        return to_completion(message)

    async def _with_retries(
        self, send: Callable[[], Awaitable[Completion]], model: str
    ) -> Completion:
        attempt = 0
        while True:
            try:
                return await send()
            except (AnthropicError, *GARBLED) as exc:
                attempt += 1
                delay = self._delay_or_raise(exc, attempt, model)
            await self._sleep(delay)

    def _delay_or_raise(self, exc: Exception, attempt: int, model: str) -> float:
        """How long to wait before attempt `attempt + 1`; raises ours when giving up."""
        if isinstance(exc, AnthropicError):
            delay = self._retry.delay(
                attempt - 1, retryable=is_retryable(exc), retry_after=_retry_after(exc)
            )
            status: int | str = _status(exc)
            request_id = _request_id(exc)
            error: LLMUnavailable = LLMUnavailable(_describe(exc))
        else:
            # A truncated or malformed body: transient, like a dropped connection.
            delay = self._retry.delay(attempt - 1, retryable=True)
            status, request_id = "malformed", None
            error = LLMBadOutput(f"malformed answer: {type(exc).__name__}")
        return wait_or_give_up(
            delay,
            error=error,
            cause=exc,
            attempt=attempt,
            model=model,
            status=status,
            api_request_id=request_id,
        )


def _retry_after(exc: AnthropicError) -> str | None:
    """The `retry-after` header the server sent with an error status, if any."""
    return exc.response.headers.get("retry-after") if isinstance(exc, APIStatusError) else None


def is_retryable(exc: AnthropicError) -> bool:
    """Whether another attempt may succeed: rate limits, overload, 5xx, network, timeouts."""
    if isinstance(exc, APIStatusError):
        return exc.status_code in (408, 429) or exc.status_code >= 500
    return isinstance(exc, APIConnectionError)


def build_system(request: LLMRequest) -> list[TextBlockParam]:
    """Persona and rules, then the standing memory, each closing a cached prefix (with
    the tools before them); then the rest of the system text, uncached on its own."""
    blocks: list[TextBlockParam] = []
    for text in (request.stable_system, request.standing_system):
        if text:
            blocks.append({"type": "text", "text": text, "cache_control": EPHEMERAL})
    if request.dynamic_system:
        blocks.append({"type": "text", "text": request.dynamic_system})
    return blocks


def build_messages(request: LLMRequest) -> list[MessageParam]:
    """The conversation, then each tool exchange as tool_use and tool_result messages.

    The message before the last user turn closes the cached prefix of the history (the
    breakpoint moves with the conversation); the `turn_context` leads the last user
    turn, after everything cached."""
    turns = merge_turns(request.turns)
    lead_text = ""
    if request.tool_exchange and turns[-1].role == "assistant":
        lead_text = turns.pop().content
    messages = [_text_message(turn) for turn in turns]
    last_user = last_user_index(turns)
    if last_user is not None:
        if last_user > 0:
            messages[last_user - 1] = _cached(turns[last_user - 1])
        if request.turn_context:
            messages[last_user] = _with_context(turns[last_user], request.turn_context)
    for calls, results in request.tool_exchange:
        content: list[ContentBlockParam] = (
            [{"type": "text", "text": lead_text}] if lead_text else []
        )
        content.extend(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.input)}
            for call in calls
        )
        messages.append({"role": "assistant", "content": content})
        messages.append({"role": "user", "content": [_tool_result(result) for result in results]})
        lead_text = ""
    return messages


def build_tools(request: LLMRequest) -> list[ToolParam]:
    """The tool specs in the API's shape."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
        for tool in request.tools
    ]


def to_completion(message: Message) -> Completion:
    """Our `Completion` from the API's message."""
    text = "".join(block.text for block in message.content if isinstance(block, TextBlock))
    calls = tuple(
        ToolCall(block.id, block.name, _tool_input(block))
        for block in message.content
        if isinstance(block, ToolUseBlock)
    )
    usage = message.usage
    return Completion(
        text=text,
        model=message.model,
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            cache_write_tokens=usage.cache_creation_input_tokens or 0,
        ),
        tool_calls=calls,
        stop_reason=message.stop_reason,
    )


def _cached(turn: Turn) -> MessageParam:
    """The turn as one text block that closes a cached prefix."""
    block: TextBlockParam = {"type": "text", "text": turn.content, "cache_control": EPHEMERAL}
    if turn.role == "user":
        return {"role": "user", "content": [block]}
    return {"role": "assistant", "content": [block]}


def _with_context(turn: Turn, context: str) -> MessageParam:
    """The last user turn led by this turn's context, in a block of its own."""
    return {
        "role": "user",
        "content": [{"type": "text", "text": context}, {"type": "text", "text": turn.content}],
    }


def _text_message(turn: Turn) -> MessageParam:
    if turn.role == "user":
        return {"role": "user", "content": turn.content}
    return {"role": "assistant", "content": turn.content}


def _tool_result(result: ToolResult) -> ToolResultBlockParam:
    return {"type": "tool_result", "tool_use_id": result.tool_call_id, "content": result.content}


def _tool_input(block: ToolUseBlock) -> dict[str, Any]:
    if not isinstance(block.input, dict):
        raise LLMBadOutput(f"tool {block.name!r} input is not an object")
    return dict(block.input)


def _check_forced_tool(request: LLMRequest, completion: Completion) -> None:
    """A forced tool call must be there and complete: one cut off at `max_tokens` has
    partial input (or none), so it is `LLMTruncated`, never used."""
    if request.force_tool is None:
        return
    if completion.stop_reason == "max_tokens":
        raise LLMTruncated(f"tool {request.force_tool!r} answer stopped at max_tokens")
    if not any(call.name == request.force_tool for call in completion.tool_calls):
        raise LLMBadOutput(
            f"asked for tool {request.force_tool!r}, got stop_reason={completion.stop_reason!r}"
        )


def _status(exc: AnthropicError) -> int | str:
    if isinstance(exc, APIStatusError):
        return exc.status_code
    return type(exc).__name__


def _request_id(exc: AnthropicError) -> str | None:
    return exc.request_id if isinstance(exc, APIStatusError) else None


def _describe(exc: AnthropicError) -> str:
    """A short cause for the error message: status, error type and the API's own words."""
    if isinstance(exc, APIStatusError):
        detail = (exc.api_message or "")[:200]
        return f"Anthropic API error {exc.status_code} ({exc.type or 'unknown'}): {detail}"
    return f"Anthropic API unreachable: {type(exc).__name__}"
