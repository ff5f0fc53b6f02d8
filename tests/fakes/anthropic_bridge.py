"""Serve an in-process `LLM` (e.g. the scenario model) through the loopback Anthropic
fake, so a scenario written for an in-process model runs through `AnthropicLLM`, the
real `anthropic` SDK and HTTP: `bridge(fake, llm, fast_model=...)`.

Each request body becomes an `LLMRequest` again, as near as the body shows it: the
cached system blocks as `stable_system` then `standing_system`, the uncached one as
`dynamic_system`; the messages as turns (the stand-in first user turn dropped, the
context block leading the last user turn as `turn_context`), tool_use and tool_result
messages as tool exchanges; `tool_choice` as the forced tool; the role by model name.
The model's `Completion` becomes the fake's answer (the fake reports the usage).
"""

from __future__ import annotations

from typing import Any

from bot.errors import LLMUnavailable
from bot.llm import (
    CONVERSATION_START,
    LLM,
    Completion,
    LLMRequest,
    ToolCall,
    ToolResult,
    ToolSpec,
    Turn,
)
from tests.fakes.anthropic_api import ErrorReply, FakeAnthropicAPI, Step, TextReply, ToolUseReply

Exchange = tuple[tuple[ToolCall, ...], tuple[ToolResult, ...]]


def bridge(fake: FakeAnthropicAPI, llm: LLM, *, fast_model: str) -> None:
    """Answer every unscripted request of `fake` with `llm` (requests for `fast_model`
    carry role "fast", all others "chat")."""

    async def respond(body: dict[str, Any]) -> Step:
        try:
            completion = await llm.complete(request_of(body, fast_model))
        except LLMUnavailable as exc:
            return ErrorReply(529, "overloaded_error", f"bridged model unavailable: {exc}")
        return step_of(completion)

    fake.responder = respond


def request_of(body: dict[str, Any], fast_model: str) -> LLMRequest:
    """The `LLMRequest` a Messages API body was built from (as near as it shows)."""
    stable, standing, dynamic = _system_parts(body.get("system"))
    turns, turn_context, exchanges = _conversation(body["messages"])
    choice = body.get("tool_choice") or {}
    return LLMRequest(
        role="fast" if body["model"] == fast_model else "chat",
        stable_system=stable,
        standing_system=standing,
        dynamic_system=dynamic,
        turns=turns,
        turn_context=turn_context,
        tools=tuple(
            ToolSpec(t["name"], t.get("description", ""), t.get("input_schema", {}))
            for t in body.get("tools") or []
        ),
        force_tool=str(choice["name"]) if choice.get("type") == "tool" else None,
        max_tokens=int(body["max_tokens"]),
        tool_exchange=exchanges,
    )


def _system_parts(system: Any) -> tuple[str, str, str]:
    """(stable, standing, dynamic): the cached blocks in order, then the uncached rest."""
    if isinstance(system, str):
        return system, "", ""
    blocks = list(system or [])
    cached = [str(b["text"]) for b in blocks if b.get("cache_control")]
    rest = [str(b["text"]) for b in blocks if not b.get("cache_control")]
    cached += ["", ""]
    return cached[0], "\n\n".join(cached[1:]).strip(), "\n\n".join(rest)


def _conversation(
    messages: list[dict[str, Any]],
) -> tuple[tuple[Turn, ...], str, tuple[Exchange, ...]]:
    """The turns, the last user turn's context, and the tool exchanges after them."""
    turns: list[Turn] = []
    exchanges: list[Exchange] = []
    context = ""
    for index, message in enumerate(messages):
        blocks = _blocks(message["content"])
        calls = tuple(
            ToolCall(str(b["id"]), str(b["name"]), dict(b.get("input") or {}))
            for b in blocks
            if b["type"] == "tool_use"
        )
        texts = [str(b["text"]) for b in blocks if b["type"] == "text"]
        if calls:
            if texts and not exchanges:
                turns.append(Turn("assistant", "\n\n".join(texts)))
            exchanges.append((calls, _results(messages, index + 1)))
            continue
        if any(b["type"] == "tool_result" for b in blocks):
            continue
        if message["role"] == "user" and len(texts) > 1:
            context, texts = texts[0], texts[1:]
        turns.append(Turn(message["role"], "\n\n".join(texts)))
    if turns and turns[0] == Turn("user", CONVERSATION_START):
        turns.pop(0)
    return tuple(turns), context, tuple(exchanges)


def _results(messages: list[dict[str, Any]], index: int) -> tuple[ToolResult, ...]:
    if index >= len(messages):
        return ()
    return tuple(
        ToolResult(str(b["tool_use_id"]), _result_text(b.get("content")))
        for b in _blocks(messages[index]["content"])
        if b["type"] == "tool_result"
    )


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content)
    return str(content or "")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def step_of(completion: Completion) -> Step:
    """The fake's answer for a `Completion`."""
    cut = completion.stop_reason == "max_tokens"
    if completion.tool_calls:
        call = completion.tool_calls[0]
        stop = "max_tokens" if cut else "tool_use"
        return ToolUseReply(call.name, dict(call.input), completion.text, stop)
    return TextReply(completion.text, "max_tokens" if cut else "end_turn")
