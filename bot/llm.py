"""The LLM port: what the core asks of a language model, in our own types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ModelRole = Literal["chat", "fast"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of the conversation sent to the model."""

    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call, with a JSON schema for its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model made."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """Our answer to a tool call, sent back in the next request."""

    tool_call_id: str
    content: str


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """A request to the model, in prompt-cache order (what repeats first).

    `stable_system` (persona and rules) and `standing_system` (the slowly changing
    memory) are system text, each the end of a cached prefix; `dynamic_system` follows
    them (summaries, notes) and is cached only as part of the history after it. The
    turns follow, the last but one closing the cached prefix of the conversation.
    `turn_context` is what changes every turn (the time, what recall found for this
    message): it goes after every cached part, into the last user turn, delimited as
    context (see `with_turn_context`). `tool_exchange` continues a turn after tool
    calls: the assistant's calls and our results, in order.
    """

    role: ModelRole
    stable_system: str
    turns: tuple[Turn, ...]
    dynamic_system: str = ""
    standing_system: str = ""
    turn_context: str = ""
    tools: tuple[ToolSpec, ...] = ()
    force_tool: str | None = None
    max_tokens: int = 1024
    tool_exchange: tuple[tuple[tuple[ToolCall, ...], tuple[ToolResult, ...]], ...] = ()


def last_user_index(turns: tuple[Turn, ...] | list[Turn]) -> int | None:
    """Where the last user turn is (None when there is none)."""
    return next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "user"), None)


def with_turn_context(turns: tuple[Turn, ...], context: str) -> tuple[Turn, ...]:
    """The turns with `context` leading the last user turn, for a provider that sends
    plain text messages (a new user turn when there is none)."""
    if not context:
        return turns
    index = last_user_index(turns)
    if index is None:
        return (*turns, Turn("user", context))
    joined = Turn("user", f"{context}\n\n{turns[index].content}")
    return (*turns[:index], joined, *turns[index + 1 :])


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one call used, including prompt-cache reads and writes."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Completion:
    """The model's answer."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str | None = None


class LLM(Protocol):
    """A language model. Raises `LLMUnavailable` (or `LLMBadOutput`) on failure."""

    async def complete(self, request: LLMRequest) -> Completion: ...


CONVERSATION_START = "(The conversation starts.)"
"""Stands in for the person when a conversation opens with the companion (a check-in)."""


def merge_turns(turns: tuple[Turn, ...]) -> list[Turn]:
    """Turns every chat API and local chat template accepts: blank ones dropped,
    same-role runs joined, the person first."""
    merged: list[Turn] = []
    for turn in turns:
        if not turn.content.strip():
            continue
        if merged and merged[-1].role == turn.role:
            merged[-1] = Turn(turn.role, f"{merged[-1].content}\n\n{turn.content}")
        else:
            merged.append(turn)
    if not merged or merged[0].role == "assistant":
        merged.insert(0, Turn("user", CONVERSATION_START))
    return merged
