"""The Anthropic bridge rebuilds the `LLMRequest` a Messages API body was made from, so
a scenario model served through `AnthropicLLM` sees what it would see in process."""

from __future__ import annotations

from typing import Any

from bot.anthropic_llm import build_messages, build_system, build_tools
from bot.llm import Completion, LLMRequest, ToolCall, ToolResult, ToolSpec, Turn
from tests.fakes.anthropic_api import TextReply, ToolUseReply
from tests.fakes.anthropic_bridge import request_of, step_of

FAST = "claude-haiku-4-5"
TOOL = ToolSpec("remember", "Save a fact.", {"type": "object", "properties": {}})


def body_of(request: LLMRequest, model: str) -> dict[str, Any]:
    """The body `AnthropicLLM` sends for `request`."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "system": build_system(request),
        "messages": build_messages(request),
        "tools": build_tools(request),
    }
    if request.force_tool:
        body["tool_choice"] = {"type": "tool", "name": request.force_tool}
    return body


def test_a_chat_turn_with_every_part_comes_back_whole() -> None:
    request = LLMRequest(
        role="chat",
        stable_system="persona",
        standing_system="<memory>\nstanding\n</memory>",
        dynamic_system="The person's display name: Maya",
        turns=(Turn("user", "hi"), Turn("assistant", "hello"), Turn("user", "tired today")),
        turn_context="<turn_context>Now: Tuesday</turn_context>",
        tools=(TOOL,),
        max_tokens=512,
    )
    assert request_of(body_of(request, "claude-sonnet-4-5-test"), FAST) == request


def test_a_tool_exchange_and_an_opening_by_the_assistant_come_back_whole() -> None:
    request = LLMRequest(
        role="chat",
        stable_system="persona",
        turns=(Turn("assistant", "Good morning!"), Turn("user", "remember my cat Miso")),
        tools=(TOOL,),
        tool_exchange=(
            (
                (ToolCall("toolu_1", "remember", {"fact": "cat Miso"}),),
                (ToolResult("toolu_1", "saved"),),
            ),
        ),
    )
    assert request_of(body_of(request, "claude-sonnet-4-5-test"), FAST) == request


def test_a_forced_tool_for_the_fast_model() -> None:
    request = LLMRequest(
        role="fast",
        stable_system="extract",
        turns=(Turn("user", "[THE PERSON]\n  I am a nurse"),),
        tools=(TOOL,),
        force_tool="remember",
    )
    assert request_of(body_of(request, FAST), FAST) == request


def test_completions_become_the_fakes_answers() -> None:
    call = ToolCall("toolu_9", "remember", {"fact": "x"})
    assert step_of(Completion("hi", "m")) == TextReply("hi", "end_turn")
    assert step_of(Completion("", "m", tool_calls=(call,), stop_reason="tool_use")) == (
        ToolUseReply("remember", {"fact": "x"}, "", "tool_use")
    )
    assert step_of(Completion("", "m", tool_calls=(call,), stop_reason="max_tokens")) == (
        ToolUseReply("remember", {"fact": "x"}, "", "max_tokens")
    )
