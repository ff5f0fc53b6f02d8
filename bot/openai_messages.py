"""Our `LLMRequest` in the Chat Completions shape, and streamed chunks back into our
`Completion`: the translation half of `bot.openai_llm`, with no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletionChunk

from bot.errors import LLMBadOutput
from bot.llm import (
    Completion,
    LLMRequest,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    merge_turns,
    with_turn_context,
)

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
"""OpenAI's finish reasons in the port's (Anthropic's) words, which the callers check."""

Message = dict[str, Any]


def system_text(request: LLMRequest, extra: str = "") -> str:
    """One system message (several confuse some local chat templates): the persona, then
    the standing memory, then the session's part, so a server's automatic prefix cache
    can reuse the longest prefix; what changes every turn leads the last user turn."""
    parts = (request.stable_system, request.standing_system, request.dynamic_system, extra)
    return "\n\n".join(part for part in parts if part.strip())


def build_messages(request: LLMRequest, extra_system: str = "") -> list[Message]:
    """The system message, the conversation, then each tool exchange as an assistant
    message with `tool_calls` followed by one `tool` message per result."""
    messages: list[Message] = []
    system = system_text(request, extra_system)
    if system:
        messages.append({"role": "system", "content": system})
    turns = merge_turns(with_turn_context(request.turns, request.turn_context))
    lead_text = ""
    if request.tool_exchange and turns[-1].role == "assistant":
        lead_text = turns.pop().content
    messages.extend({"role": turn.role, "content": turn.content} for turn in turns)
    for calls, results in request.tool_exchange:
        messages.append(assistant_calls(calls, lead_text))
        messages.extend(tool_message(result) for result in results)
        lead_text = ""
    return messages


def assistant_calls(calls: tuple[ToolCall, ...], text: str = "") -> Message:
    """The assistant's tool calls, arguments as a JSON string as the API wants them."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.input)},
            }
            for call in calls
        ],
    }


def tool_message(result: ToolResult) -> Message:
    """Our answer to one tool call."""
    return {"role": "tool", "tool_call_id": result.tool_call_id, "content": result.content}


def build_tools(tools: tuple[ToolSpec, ...]) -> list[Message]:
    """Our tool specs as function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamedAnswer:
    """The chunks of one streamed answer, put back together."""

    model: str
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)

    def add(self, chunk: ChatCompletionChunk) -> None:
        """Fold one chunk in: text, tool-call fragments (by index), finish reason, usage."""
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = to_usage(chunk.usage)
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if delta.content:
                self.text.append(delta.content)
            for fragment in delta.tool_calls or ():
                call = self.calls.setdefault(fragment.index, _PartialCall())
                call.id = fragment.id or call.id
                if fragment.function is not None:
                    call.name = fragment.function.name or call.name
                    call.arguments.append(fragment.function.arguments or "")
            self.finish_reason = choice.finish_reason or self.finish_reason

    def raw_calls(self) -> list[tuple[str, str, str]]:
        """(id, name, arguments as streamed) of each tool call, in order."""
        return [
            (call.id or f"call_{index}", call.name, "".join(call.arguments))
            for index, call in sorted(self.calls.items())
        ]

    def completion(self) -> Completion:
        """Our `Completion`. A call's arguments that are not a JSON object are bad output,
        unless the answer was cut off (then the caller sees `max_tokens` and decides)."""
        stop_reason = STOP_REASONS.get(self.finish_reason or "", self.finish_reason)
        calls = tuple(
            ToolCall(call_id, name, _arguments(name, arguments))
            for call_id, name, arguments in self.raw_calls()
            if stop_reason != "max_tokens"
        )
        return Completion(
            text="".join(self.text),
            model=self.model,
            usage=self.usage,
            tool_calls=calls,
            stop_reason=stop_reason,
        )


def _arguments(name: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw.strip() or "{}")
    except ValueError as exc:
        raise LLMBadOutput(f"tool {name!r} arguments are not JSON") from exc
    if not isinstance(value, dict):
        raise LLMBadOutput(f"tool {name!r} arguments are not an object")
    return value


def to_usage(usage: Any) -> Usage:
    """Token counts in the port's terms: `input_tokens` excludes the cached part, which is
    `cache_read_tokens` (from `prompt_tokens_details.cached_tokens` when the server says)."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    prompt = int(usage.prompt_tokens or 0)
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(usage.completion_tokens or 0),
        cache_read_tokens=cached,
    )
