"""Serve an in-process `LLM` (e.g. `ScriptedLLM`) through the loopback OpenAI-compatible
fake, so a scenario written for the scripted model runs through `OpenAILLM`, the real
`openai` SDK and HTTP: `bridge(fake, scripted, fast_model=...)`.

Each request body becomes an `LLMRequest` again (the system message as `stable_system`;
the forced tool from `tool_choice`, from `response_format`'s schema name, or from the
JSON-in-text instruction), and the model's `Completion` becomes the fake's answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.errors import LLMUnavailable
from bot.llm import LLM, Completion, LLMRequest, ToolCall, ToolResult, ToolSpec, Turn
from tests.fakes.openai_api import ErrorReply, FakeOpenAIAPI, Step, TextReply, ToolCallReply

_INSTRUCTED = re.compile(
    r"the input of `([^`]+)` \((.*?)\)\. It must match this JSON schema:\n(.+)$", re.S
)


def bridge(fake: FakeOpenAIAPI, llm: LLM, *, fast_model: str) -> None:
    """Answer every unscripted request of `fake` with `llm` (requests for `fast_model`
    carry role "fast", all others "chat")."""

    async def respond(body: dict[str, Any]) -> Step:
        try:
            completion = await llm.complete(request_of(body, fast_model))
        except LLMUnavailable as exc:
            return ErrorReply(503, f"bridged model unavailable: {exc}", "server_error")
        return step_of(completion)

    fake.responder = respond


def request_of(body: dict[str, Any], fast_model: str) -> LLMRequest:
    """The `LLMRequest` a Chat Completions body was built from (as near as it shows)."""
    messages: list[dict[str, Any]] = body["messages"]
    system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")
    tools = [
        ToolSpec(
            t["function"]["name"],
            t["function"].get("description", ""),
            t["function"].get("parameters", {}),
        )
        for t in body.get("tools") or []
    ]
    force = _forced_name(body, system, tools)
    return LLMRequest(
        role="fast" if body["model"] == fast_model else "chat",
        stable_system=system,
        turns=tuple(
            Turn(m["role"], str(m.get("content") or ""))
            for m in messages
            if m["role"] in ("user", "assistant") and not m.get("tool_calls")
        ),
        tools=tuple(tools),
        force_tool=force,
        max_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 1024),
        tool_exchange=_exchanges(messages),
    )


def _forced_name(body: dict[str, Any], system: str, tools: list[ToolSpec]) -> str | None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return str(choice["function"]["name"])
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        spec = response_format["json_schema"]
        tools.append(ToolSpec(spec["name"], "", spec.get("schema", {})))
        return str(spec["name"])
    instructed = _INSTRUCTED.search(system)
    if instructed:
        name, description, schema = instructed.groups()
        tools.append(ToolSpec(name, description, json.loads(schema.strip())))
        return name
    return None


def _exchanges(
    messages: list[dict[str, Any]],
) -> tuple[tuple[tuple[ToolCall, ...], tuple[ToolResult, ...]], ...]:
    exchanges = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        calls = tuple(
            ToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
            for c in message["tool_calls"]
        )
        results = tuple(
            ToolResult(m["tool_call_id"], str(m["content"]))
            for m in messages[index + 1 :]
            if m["role"] == "tool"
        )
        exchanges.append((calls, results))
    return tuple(exchanges)


def step_of(completion: Completion) -> Step:
    """The fake's answer for a `Completion`."""
    cut = completion.stop_reason == "max_tokens"
    if completion.tool_calls:
        call = completion.tool_calls[0]
        return ToolCallReply(
            call.name, dict(call.input), completion.text, "length" if cut else "tool_calls"
        )
    return TextReply(completion.text, "length" if cut else "stop")
