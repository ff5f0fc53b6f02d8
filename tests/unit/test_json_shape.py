"""The shape check of structured answers, and reading JSON out of a model's text."""

from __future__ import annotations

from typing import Any

import pytest

from bot.json_shape import shape_problems
from bot.openai_structured import parse_text

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "importance": {"type": "number"},
                    "ids": {"type": "array", "items": {"type": "integer"}},
                    "when": {"type": ["string", "null"]},
                    "tier": {"enum": ["core", "active"]},
                },
                "required": ["content", "importance"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["memories"],
}


def test_a_fitting_answer_has_no_problems() -> None:
    answer = {
        "memories": [
            {"content": "likes tea", "importance": 6, "ids": [1, 2.0], "when": None},
            {"content": "has a cat", "importance": 4.5, "when": "2026-03-02", "tier": "core"},
        ]
    }
    assert shape_problems(answer, SCHEMA) == []


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({}, "$.memories: is required"),
        ({"memories": "lots"}, "$.memories: must be an array"),
        ({"memories": [{"content": "x"}]}, "$.memories[0].importance: is required"),
        ({"memories": [{"content": 1, "importance": 2}]}, "$.memories[0].content: must be a"),
        ({"memories": [{"content": "x", "importance": True}]}, "importance: must be a number"),
        ({"memories": [{"content": "x", "importance": 1, "ids": [1.5]}]}, "ids[0]: must be an"),
        ({"memories": [{"content": "x", "importance": 1, "tier": "x"}]}, "tier: must be one of"),
        ({"memories": [{"content": "x", "importance": 1, "mood": "ok"}]}, "mood: is not allowed"),
        ({"memories": [{"content": "x", "importance": 1, "when": 5}]}, "a string or a null"),
    ],
)
def test_each_kind_of_misfit_is_named_with_its_path(answer: Any, problem: str) -> None:
    problems = shape_problems(answer, SCHEMA)
    assert any(problem in line for line in problems), problems


@pytest.mark.parametrize(
    "text",
    [
        '{"memories": []}',
        '```json\n{"memories": []}\n```',
        'Here you go: {"memories": []} Hope that helps!',
    ],
)
def test_the_json_object_is_found_in_the_text(text: str) -> None:
    assert parse_text(text, SCHEMA).value == {"memories": []}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("I could not find anything.", "no JSON object"),
        ('{"memories": [', "no JSON object"),
        ('{"memories": [}', "not valid JSON"),
        ('{"facts": []}', "$.memories: is required"),
    ],
)
def test_text_without_a_fitting_object_is_a_problem_not_a_value(text: str, problem: str) -> None:
    parsed = parse_text(text, SCHEMA)
    assert parsed.value is None and problem in parsed.problem
