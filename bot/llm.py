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
    """A request to the model.

    `stable_system` comes first and is cached (persona and rules); `dynamic_system`
    follows it and changes every turn (memory, summary). `tool_exchange` continues a
    turn after tool calls: the assistant's calls and our results, in order.
    """

    role: ModelRole
    stable_system: str
    turns: tuple[Turn, ...]
    dynamic_system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    force_tool: str | None = None
    max_tokens: int = 1024
    tool_exchange: tuple[tuple[tuple[ToolCall, ...], tuple[ToolResult, ...]], ...] = ()


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
