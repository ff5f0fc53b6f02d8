"""An in-process `LLM` that answers from a script and records every request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bot.errors import LLMUnavailable
from bot.llm import Completion, LLMRequest, ToolCall, Usage

Responder = Callable[[LLMRequest], Completion]


def text(reply: str) -> Completion:
    """A plain text completion."""
    return Completion(text=reply, model="fake-chat", usage=Usage(10, 5))


def tool_call(name: str, arguments: dict[str, object], call_id: str = "toolu_1") -> Completion:
    """A completion that calls one tool."""
    return Completion(
        text="",
        model="fake-chat",
        usage=Usage(10, 5),
        tool_calls=(ToolCall(call_id, name, dict(arguments)),),
        stop_reason="tool_use",
    )


@dataclass
class ScriptedLLM:
    """Pops scripted completions (or raises `LLMUnavailable` when told to be down)."""

    script: list[Completion | Exception] = field(default_factory=list)
    default: Responder = field(default=lambda request: text("Tell me more."))
    requests: list[LLMRequest] = field(default_factory=list)
    down: bool = False

    async def complete(self, request: LLMRequest) -> Completion:
        self.requests.append(request)
        if self.down:
            raise LLMUnavailable("scripted outage")
        if self.script:
            step = self.script.pop(0)
            if isinstance(step, Exception):
                raise step
            return step
        return self.default(request)

    def last_prompt_text(self) -> str:
        """Everything the model saw in the last request, as one string."""
        request = self.requests[-1]
        turns = "\n".join(f"{turn.role}: {turn.content}" for turn in request.turns)
        return f"{request.stable_system}\n{request.dynamic_system}\n{turns}"
