"""A small JSON-schema check for structured answers: the keywords that decide a value's
shape (`type`, `properties`, `required`, `additionalProperties: false`, `items`, `enum`).

Bounds (`maxLength`, `minimum`, ...) are left to the pydantic models of the callers, which
check each item and keep the good ones; this check only makes sure no half-shaped answer
reaches them.
"""

from __future__ import annotations

from typing import Any

MAX_PROBLEMS = 8

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def shape_problems(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """What is wrong with `value` under `schema`, one line each (empty when it fits)."""
    problems: list[str] = []
    _check(value, schema, path, problems)
    return problems[:MAX_PROBLEMS]


def _check(value: Any, schema: dict[str, Any], path: str, problems: list[str]) -> None:
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: must be one of {schema['enum']!r}")
        return
    if "type" in schema and not _has_type(value, schema["type"]):
        problems.append(f"{path}: must be {_type_words(schema['type'])}")
        return
    if isinstance(value, dict):
        _check_object(value, schema, path, problems)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{index}]", problems)


def _check_object(
    value: dict[str, Any], schema: dict[str, Any], path: str, problems: list[str]
) -> None:
    properties: dict[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            problems.append(f"{path}.{name}: is required")
    for name, item in value.items():
        if name in properties:
            _check(item, properties[name], f"{path}.{name}", problems)
        elif schema.get("additionalProperties") is False:
            problems.append(f"{path}.{name}: is not allowed")


def _has_type(value: Any, expected: str | list[str]) -> bool:
    names = [expected] if isinstance(expected, str) else expected
    for name in names:
        kinds = _TYPES.get(name)
        if kinds is None:
            return True  # a type we do not know: let the caller's model decide
        if isinstance(value, bool) and name not in ("boolean",):
            continue  # JSON true is not a number
        if name == "integer" and isinstance(value, float):
            if value.is_integer():
                return True
            continue
        if isinstance(value, kinds):
            return True
    return False


def _type_words(expected: str | list[str]) -> str:
    names = [expected] if isinstance(expected, str) else expected
    return " or ".join(f"{'an' if n[0] in 'aeiou' else 'a'} {n}" for n in names)
