"""The memory layer's `ToolCaller` and `TextWriter` ports, on top of our `LLM` port (the
fast model)."""

from __future__ import annotations

from typing import Any

from bot.errors import LLMBadOutput, LLMTruncated
from bot.llm import LLM, LLMRequest, ToolSpec, Turn
from memory.store.errors import AnswerTruncated


class LLMToolCaller:
    """Asks the fast model to answer through exactly one tool call, or in plain text."""

    def __init__(self, llm: LLM, *, max_tokens: int = 2048) -> None:
        self._llm = llm
        self._max_tokens = max_tokens

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
        """The input of the forced tool call; `LLMBadOutput` when there is none,
        `AnswerTruncated` when the answer stopped at its token limit."""
        request = LLMRequest(
            role="fast",
            stable_system=system,
            turns=(Turn("user", prompt),),
            tools=(ToolSpec(tool_name, tool_description, input_schema),),
            force_tool=tool_name,
            max_tokens=max_tokens or self._max_tokens,
        )
        try:
            completion = await self._llm.complete(request)
        except LLMTruncated as exc:
            raise AnswerTruncated(str(exc)) from exc
        if completion.stop_reason == "max_tokens":
            raise AnswerTruncated(f"{tool_name} answer stopped at max_tokens")
        for call in completion.tool_calls:
            if call.name == tool_name:
                return call.input
        raise LLMBadOutput(f"the model did not call {tool_name}")

    async def write(self, *, system: str, prompt: str) -> str:
        """The fast model's plain-text answer."""
        request = LLMRequest(role="fast", stable_system=system, turns=(Turn("user", prompt),))
        return (await self._llm.complete(request)).text
