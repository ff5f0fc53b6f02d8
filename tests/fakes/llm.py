"""A scripted `ToolCaller`: the fast model answering forced tool calls, for tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ToolCallerDown(RuntimeError):
    """The scripted model is unreachable."""


@dataclass(frozen=True)
class ToolRequest:
    """One call the code under test made."""

    system: str
    prompt: str
    tool_name: str
    tool_description: str
    input_schema: dict[str, Any]
    max_tokens: int | None = None


Answer = dict[str, Any] | Exception | Callable[[ToolRequest], dict[str, Any]]


@dataclass
class FakeToolCaller:
    """Pops scripted answers (a tool input, an exception to raise, or a function of the
    request); falls back to `default`; raises `ToolCallerDown` while `down` is set."""

    script: list[Answer] = field(default_factory=list)
    default: Answer = field(default_factory=lambda: {"memories": []})
    down: bool = False
    requests: list[ToolRequest] = field(default_factory=list)

    async def call_tool(
        self,
        *,
        system: str,
        prompt: str,
        tool_name: str,
        tool_description: str,
        input_schema: dict[str, Any],
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        request = ToolRequest(system, prompt, tool_name, tool_description, input_schema, max_tokens)
        self.requests.append(request)
        if self.down:
            raise ToolCallerDown("scripted outage")
        answer = self.script.pop(0) if self.script else self.default
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer

    def answer(self, *memories: dict[str, Any]) -> None:
        """Queue one `record_memories` answer with these candidates."""
        self.script.append({"memories": list(memories)})

    @property
    def last_prompt(self) -> str:
        """The prompt of the latest call."""
        return self.requests[-1].prompt
