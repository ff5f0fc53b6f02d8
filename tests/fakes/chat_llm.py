"""An in-process `LLM` that answers from a script and records every request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bot.errors import LLMUnavailable
from bot.llm import Completion, LLMRequest, ToolCall, Usage
from tests.fakes.tool_schemas import ANTHROPIC_NAME, tools_problem

Responder = Callable[[LLMRequest], Completion]
ToolResponder = Callable[[LLMRequest], dict[str, object]]


def context_text(request: LLMRequest) -> str:
    """Everything the model sees around the turns: the system parts and the context that
    leads the last user turn."""
    parts = (request.stable_system, request.standing_system, request.dynamic_system)
    return "\n".join((*parts, request.turn_context))


def prompt_text(request: LLMRequest, turns: str) -> str:
    """The whole prompt as one string, given its turns rendered."""
    return f"{context_text(request)}\n{turns}"


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
    tools: dict[str, ToolResponder | list[dict[str, object]]] = field(default_factory=dict)
    """Answers to forced tool calls by tool name: a function of the request, or a queue.
    With none, `record_memories` finds nothing, `judge_memories` leaves every statement
    new, and other tools are unavailable."""

    async def complete(self, request: LLMRequest) -> Completion:
        problem = tools_problem(
            [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ],
            ANTHROPIC_NAME,
        )
        if problem is not None:  # what the real APIs answer with a 400
            raise ValueError(f"invalid tool definition: {problem}")
        self.requests.append(request)
        if self.down:
            raise LLMUnavailable("scripted outage")
        if request.force_tool is not None:
            return self._forced(request, request.force_tool)
        if self.script:
            step = self.script.pop(0)
            if isinstance(step, Exception):
                raise step
            return step
        return self.default(request)

    def _forced(self, request: LLMRequest, name: str) -> Completion:
        answer = self.tools.get(name)
        if isinstance(answer, list):
            if not answer:
                raise LLMUnavailable(f"no scripted answer left for {name}")
            step = answer.pop(0)
            if isinstance(step, Exception):
                raise step
            return tool_call(name, step)
        if answer is not None:
            return tool_call(name, answer(request))
        if name == "record_memories":
            return tool_call(name, {"memories": []})
        if name == "judge_memories":
            return tool_call(name, {"verdicts": []})  # every statement stays new
        raise LLMUnavailable(f"no scripted answer for {name}")

    @property
    def chat_requests(self) -> list[LLMRequest]:
        """The conversation requests (not extraction or classification)."""
        return [r for r in self.requests if r.role == "chat"]

    def last_prompt_text(self) -> str:
        """Everything the model saw in the last request, as one string."""
        request = self.chat_requests[-1]
        turns = "\n".join(f"{turn.role}: {turn.content}" for turn in request.turns)
        return prompt_text(request, turns)
