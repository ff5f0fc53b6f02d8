"""Structured answers from OpenAI-compatible servers, whatever they support.

Three ways to get one JSON object for a forced tool, tried in this order per model:

    tools        a forced function call (`tool_choice` naming the function)
    json_schema  `response_format={"type": "json_schema", ...}` and the schema in the prompt
    json_text    only the prompt: "reply with one JSON object matching this schema"

A server that refuses a way (HTTP 400 naming it, e.g. Ollama's "... does not support
tools") moves the model to the next one for the rest of the process. Whatever the way,
the answer is checked against the schema (`bot.json_shape`) and, when it does not fit,
asked for once more with the problems named; then it is used whole or not at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from openai import APIStatusError

from bot.json_shape import shape_problems
from bot.llm import LLMRequest, ToolCall, ToolSpec
from bot.openai_messages import Message, StreamedAnswer, assistant_calls, build_tools

Mode = Literal["tools", "json_schema", "json_text"]
NEXT_MODE: dict[Mode, Mode] = {"tools": "json_schema", "json_schema": "json_text"}

REFUSAL_STATUSES = (400, 404, 422, 501)
"""Statuses with which servers refuse a feature (404: some routers for unknown params)."""
_REFUSES: dict[Mode, re.Pattern[str]] = {
    "tools": re.compile(r"tool|function", re.IGNORECASE),
    "json_schema": re.compile(r"response_format|json_schema|json schema", re.IGNORECASE),
}
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_MAX_ECHO = 4000


@dataclass(frozen=True, slots=True)
class Parsed:
    """A JSON object that fits the schema, or what is wrong with the answer."""

    value: dict[str, Any] | None
    problem: str = ""


class FeatureRefused(Exception):
    """The server refused the way of asking for structure that `mode` uses."""

    def __init__(self, mode: Mode, detail: str) -> None:
        super().__init__(f"{mode} refused: {detail}")
        self.mode = mode


def refused(exc: Exception, mode: Mode) -> bool:
    """Whether `exc` is the server saying it does not support `mode` (not a bad request
    of ours, nor an unknown model)."""
    if not isinstance(exc, APIStatusError) or exc.status_code not in REFUSAL_STATUSES:
        return False
    pattern = _REFUSES.get(mode)
    message = _message(exc)
    if pattern is None or ("model" in message.lower() and "not found" in message.lower()):
        return False
    return bool(pattern.search(message))


def _message(exc: APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])
        return json.dumps(body)
    return exc.message


def instruction(tool: ToolSpec) -> str:
    """The system prompt addition of the JSON modes: the tool's schema as the answer's."""
    return (
        f"Answer with one JSON object and nothing else (no prose, no code fence): the input "
        f"of `{tool.name}` ({tool.description}). It must match this JSON schema:\n"
        f"{json.dumps(tool.input_schema, separators=(',', ':'))}"
    )


def response_format(tool: ToolSpec) -> dict[str, Any]:
    """`response_format` asking for the tool's schema."""
    return {
        "type": "json_schema",
        "json_schema": {"name": tool.name, "schema": tool.input_schema, "strict": True},
    }


def parse_text(text: str, schema: dict[str, Any]) -> Parsed:
    """The JSON object in an answer's text (a code fence or prose around it is tolerated),
    checked against `schema`."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    start, end = stripped.find("{"), stripped.rfind("}")
    if start < 0 or end < start:
        return Parsed(None, "the answer has no JSON object")
    try:
        value = json.loads(stripped[start : end + 1])
    except ValueError as exc:
        return Parsed(None, f"the answer is not valid JSON ({exc})")
    return check(value, schema)


def parse_arguments(arguments: str, schema: dict[str, Any]) -> Parsed:
    """A tool call's arguments (a JSON string), checked against `schema`."""
    try:
        value = json.loads(arguments.strip() or "{}")
    except ValueError as exc:
        return Parsed(None, f"the arguments are not valid JSON ({exc})")
    return check(value, schema)


def check(value: Any, schema: dict[str, Any]) -> Parsed:
    """`value` when it is an object that fits `schema`; else the problems."""
    if not isinstance(value, dict):
        return Parsed(None, "the answer must be a JSON object")
    problems = shape_problems(value, schema)
    if problems:
        return Parsed(None, "; ".join(problems))
    return Parsed(value)


def repair_request(problem: str, tool: ToolSpec) -> str:
    """The one follow-up after an answer that did not fit."""
    return (
        f"That answer cannot be used: {problem}. Answer again with the complete input of "
        f"`{tool.name}` as one JSON object matching the schema, fixing exactly these problems."
    )


def echo(text: str) -> str:
    """The model's unusable answer as it goes back to it (bounded)."""
    return text[:_MAX_ECHO] or "(empty)"


def structured_options(mode: Mode, request: LLMRequest, tool: ToolSpec) -> dict[str, Any]:
    """The request options of `mode`: the forced function, or the response format."""
    if mode == "tools":
        return {
            "tools": build_tools(request.tools),
            "tool_choice": {"type": "function", "function": {"name": tool.name}},
        }
    if mode == "json_schema":
        return {"response_format": response_format(tool)}
    return {}


def parse_answer(answer: StreamedAnswer, tool: ToolSpec) -> tuple[Parsed, str | None, str]:
    """The forced tool's input from a call of it or, when the model answered in text
    (some servers ignore `tool_choice`), from the text; with the call's id and arguments."""
    for call_id, name, arguments in answer.raw_calls():
        if name == tool.name:
            return parse_arguments(arguments, tool.input_schema), call_id, arguments
    text = "".join(answer.text)
    if not text.strip():
        return Parsed(None, f"the answer has no call of {tool.name} and no JSON"), None, ""
    return parse_text(text, tool.input_schema), None, text


def repair_messages(
    parsed: Parsed, call_id: str | None, arguments: str, answer: StreamedAnswer, tool: ToolSpec
) -> list[Message]:
    """The unusable answer as the model gave it, then what was wrong with it."""
    follow_up = repair_request(parsed.problem, tool)
    if call_id is None:
        return [
            {"role": "assistant", "content": echo("".join(answer.text))},
            {"role": "user", "content": follow_up},
        ]
    call = ToolCall(call_id, tool.name, {})
    said = assistant_calls((call,))
    said["tool_calls"][0]["function"]["arguments"] = echo(arguments)
    return [said, {"role": "tool", "tool_call_id": call_id, "content": follow_up}]
