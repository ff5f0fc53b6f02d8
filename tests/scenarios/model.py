"""The language model of the scenarios: records every request with the virtual time it
was made at, and answers by role.

- Conversation turns: the next scripted completion (e.g. a `remember` tool call, then
  a text), else a plain friendly reply.
- Forced tool calls: extraction (`record_memories`) by rules over the person's quoted
  messages, scripted per scenario ("when a message says 'vegetarian', return this");
  check-ins and follow-ups (`decide_checkin`) written from the occasion they are asked
  about; session summaries, the diary and merges written from exactly what they were
  shown, so a forgotten word that reaches them shows up in what they write.

A forced tool the scenarios have no answer for fails like an unavailable model, and its
name is kept in `unscripted` so a failing scenario says what it could not answer.
"""

from __future__ import annotations

import html
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.errors import LLMUnavailable
from bot.llm import Completion, LLMRequest, ToolCall, Usage, with_turn_context
from memory.store.ports import Clock
from tests.fakes.extractor import RuleExtractor
from tests.fakes.quoted import person_said

ToolAnswer = Callable[[LLMRequest], dict[str, object]]
CHAT_REPLY = "That sounds like a lot — tell me more?"

_EVENT_LINE = re.compile(r"<item>(.*?)</item>", re.DOTALL)
_OVER = "These events they told you about are over now"


def text_completion(reply: str) -> Completion:
    """A plain text answer."""
    return Completion(text=reply, model="fake-chat", usage=Usage(10, 5))


def tool_completion(name: str, arguments: dict[str, object], call_id: str) -> Completion:
    """An answer that calls one tool."""
    return Completion(
        text="",
        model="fake-chat",
        usage=Usage(10, 5),
        tool_calls=(ToolCall(call_id, name, dict(arguments)),),
        stop_reason="tool_use",
    )


def request_text(request: LLMRequest) -> str:
    """Everything a request shows the model, as one string, in the order every provider
    sends it: system parts, turns (this turn's context leading the last user turn), tool
    calls and results."""
    parts = [request.stable_system, request.standing_system, request.dynamic_system]
    turns = with_turn_context(request.turns, request.turn_context)
    parts += [f"{turn.role}: {turn.content}" for turn in turns]
    for calls, results in request.tool_exchange:
        parts += [f"tool call {c.name}: {c.input}" for c in calls]
        parts += [f"tool result: {r.content}" for r in results]
    return "\n".join(parts)


def person_lines(prompt: str) -> list[str]:
    """The person's quoted messages in an extraction, summary or diary prompt."""
    return [" ".join(said.text.split()) for said in person_said(prompt)]


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request the model received, at a virtual time."""

    at: datetime
    request: LLMRequest
    index: int

    @property
    def text(self) -> str:
        """The whole request as one string."""
        return request_text(self.request)

    @property
    def tool(self) -> str | None:
        """The tool the model was made to call (None for a conversation turn)."""
        return self.request.force_tool

    @property
    def offered_tools(self) -> tuple[str, ...]:
        """The names of the tools the model could call."""
        return tuple(t.name for t in self.request.tools)

    @property
    def is_chat_turn(self) -> bool:
        """A reply to the person (not extraction, a summary, a check-in or the diary)."""
        return self.request.role == "chat" and self.request.force_tool is None

    @property
    def memory_block(self) -> str:
        """The `<memory>` blocks of the prompt, the standing one (cached) and the one for
        this turn, as one text ('' when there is none). Searched in the whole request:
        through a provider the request is rebuilt from the HTTP body, so a block may sit
        in another part than the core put it in (e.g. the system message, a turn)."""
        return "\n".join(re.findall(r"<memory>\n.*?</memory>", self.text, re.DOTALL))


def write_checkin(request: LLMRequest) -> dict[str, object]:
    """`decide_checkin`: ask how the events that are over went, else a plain good morning."""
    occasion = request.turns[-1].content if request.turns else ""
    if _OVER in occasion:
        events = [html.unescape(e) for e in _EVENT_LINE.findall(occasion.split(_OVER, 1)[1])]
        return {"send": True, "message": f"How did it go? ({'; '.join(events)})"}
    return {"send": True, "message": "Good morning! How is the day starting?"}


def write_summary(request: LLMRequest) -> dict[str, object]:
    """`write_session_summary`: what the person said, word for word."""
    said = person_lines(request.turns[0].content)
    return {"summary": ("They said: " + " / ".join(said))[:780] if said else "A short chat."}


def write_diary(request: LLMRequest) -> dict[str, object]:
    """`write_diary`: a line per thing the person said, and notes to ask about them."""
    said = person_lines(request.turns[0].content)
    lines = [f"They told me: {s[:200]}" for s in said][:4] + ["A quiet day."] * 3
    notes = [f"Ask about: {s[:200]}" for s in said][:4] + ["Be gentle."] * 3
    return {"lines": lines[:5], "notes_to_self": notes[:7]}


def merge_notes(request: LLMRequest) -> dict[str, object]:
    """`merge_memories`: the first note, as it was."""
    found = re.search(r"<note>(.*?)</note>", request.turns[0].content, re.DOTALL)
    return {"content": html.unescape(found.group(1)) if found else "merged note"}


def classify(request: LLMRequest) -> dict[str, object]:
    """`classify_memory` (for `/remember` and the `remember` tool): a plain fact."""
    return {"category": "fact", "importance": 6}


@dataclass
class ScenarioModel:
    """A fake `LLM` for whole scenarios; see the module docstring."""

    clock: Clock
    extractor: RuleExtractor = field(default_factory=RuleExtractor)
    prompts: list[Prompt] = field(default_factory=list)
    chat_script: deque[Completion] = field(default_factory=deque)
    tools: dict[str, ToolAnswer] = field(default_factory=dict)
    unscripted: list[str] = field(default_factory=list)
    _calls: int = 0

    def __post_init__(self) -> None:
        defaults: dict[str, ToolAnswer] = {
            "record_memories": self.extractor,
            "decide_checkin": write_checkin,
            "write_session_summary": write_summary,
            "write_diary": write_diary,
            "merge_memories": merge_notes,
            "classify_memory": classify,
        }
        self.tools = defaults | self.tools

    async def complete(self, request: LLMRequest) -> Completion:
        """Record the request, then answer it."""
        self.prompts.append(Prompt(self.clock.now(), request, len(self.prompts)))
        if request.force_tool is not None:
            answer = self.tools.get(request.force_tool)
            if answer is None:
                self.unscripted.append(request.force_tool)
                raise LLMUnavailable(f"the scenario has no answer for {request.force_tool}")
            return self._call(request.force_tool, answer(request))
        if self.chat_script:
            return self.chat_script.popleft()
        return text_completion(CHAT_REPLY)

    def _call(self, name: str, arguments: dict[str, object]) -> Completion:
        self._calls += 1
        return tool_completion(name, arguments, f"toolu_{self._calls}")

    def next_turn_calls(self, name: str, arguments: dict[str, Any], then: str) -> None:
        """The next conversation turn calls tool `name`, then answers `then`."""
        self._calls += 1
        self.chat_script.append(tool_completion(name, arguments, f"toolu_{self._calls}"))
        self.chat_script.append(text_completion(then))
