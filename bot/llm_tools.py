"""The memory layer's `ToolCaller` port, on top of our `LLM` port (the fast model)."""

from __future__ import annotations

from typing import Any

from bot.errors import LLMBadOutput
from bot.llm import LLM, LLMRequest, ToolSpec, Turn


class LLMToolCaller:
    """Asks the fast model to answer through exactly one tool call."""

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
    ) -> dict[str, Any]:
        """The input of the forced tool call; `LLMBadOutput` when there is none."""
        completion = await self._llm.complete(
            LLMRequest(
                role="fast",
                stable_system=system,
                turns=(Turn("user", prompt),),
                tools=(ToolSpec(tool_name, tool_description, input_schema),),
                force_tool=tool_name,
                max_tokens=self._max_tokens,
            )
        )
        for call in completion.tool_calls:
            if call.name == tool_name:
                return call.input
        raise LLMBadOutput(f"the model did not call {tool_name}")
