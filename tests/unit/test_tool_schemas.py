"""The fakes check tool definitions as the real APIs do, and ours pass."""

from __future__ import annotations

import pytest

from bot.llm import LLMRequest, ToolSpec, Turn
from bot.memory_gateway import REMEMBER_TOOL
from bot.memory_tools import MEMORY_TOOLS
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.tool_schemas import ANTHROPIC_NAME, schema_problem, tools_problem

OURS = (REMEMBER_TOOL, *MEMORY_TOOLS)


def _listed(tools: tuple[ToolSpec, ...]) -> list[dict[str, object]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ]


def test_the_chat_tools_are_valid_json_schema() -> None:
    assert tools_problem(_listed(OURS), ANTHROPIC_NAME) is None


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"n": {"type": "strang"}}}, "JSON schema is invalid"),
        ({"type": "object", "required": "n"}, "JSON schema is invalid"),
        ({"type": "object", "properties": {"n": {"maxLength": -1}}}, "JSON schema is invalid"),
        ({"type": "string"}, "Input should be 'object'"),
        ([], "valid dictionary"),
    ],
)
def test_a_broken_schema_is_refused(schema: object, problem: str) -> None:
    assert problem in (schema_problem(schema) or "")


def test_names_must_match_the_pattern_and_be_unique() -> None:
    spaced = ToolSpec("update memory", "x", {"type": "object"})
    assert "should match pattern" in (tools_problem(_listed((spaced,)), ANTHROPIC_NAME) or "")
    twice = (*OURS, OURS[1])
    assert tools_problem(_listed(twice), ANTHROPIC_NAME) == "tools: Tool names must be unique."


async def test_the_scripted_model_refuses_a_broken_tool_like_the_api() -> None:
    llm = ScriptedLLM()
    broken = ToolSpec("broken", "x", {"type": "object", "required": "n"})
    request = LLMRequest(
        role="chat", stable_system="", turns=(Turn("user", "hi"),), tools=(broken,)
    )
    with pytest.raises(ValueError, match="invalid tool definition"):
        await llm.complete(request)
    assert llm.requests == []
