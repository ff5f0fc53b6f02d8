"""Tool definitions checked as the real APIs check them: each input schema must be a
valid JSON Schema (draft 2020-12, the dialect Anthropic and OpenAI validate against) of
an object, names follow the API's pattern and are unique. Shared by the loopback fakes
and the in-process scripted model."""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def schema_problem(schema: object) -> str | None:
    """Why `schema` is not a valid JSON Schema of an object input, or None."""
    if not isinstance(schema, dict):
        return "Input should be a valid dictionary"
    if schema.get("type") != "object":
        return "type: Input should be 'object'"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"JSON schema is invalid: {exc.message}"
    return None


def tools_problem(tools: list[dict[str, Any]], name_pattern: re.Pattern[str]) -> str | None:
    """The first problem with a list of (name, description, schema) tool definitions."""
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        name = str(tool.get("name", ""))
        if not name_pattern.match(name):
            return f"tools.{index}.name: String should match pattern '{name_pattern.pattern}'"
        if name in seen:
            return "tools: Tool names must be unique."
        seen.add(name)
        if not isinstance(tool.get("description", ""), str):
            return f"tools.{index}.description: Input should be a valid string"
        problem = schema_problem(tool.get("input_schema"))
        if problem is not None:
            return f"tools.{index}.input_schema: {problem}"
    return None
