"""A stand-in for the fast model's `record_memories` answer: rules over the person's
messages exactly as the extraction prompt quotes them (ids, authors, local times)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.llm import LLMRequest
from tests.fakes.quoted import person_said


@dataclass
class RuleExtractor:
    """For each person message matching a rule's pattern, answers the rule's memory."""

    rules: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)

    def add(self, pattern: str, **memory: Any) -> None:
        """When a person message matches `pattern`, remember `memory` (with defaults)."""
        defaults = {"tier": "core", "category": "fact", "importance": 6, "confidence": 0.9}
        self.rules.append((pattern, defaults | memory))

    def __call__(self, request: LLMRequest) -> dict[str, object]:
        prompt = request.turns[0].content
        self.prompts.append(prompt)
        found: list[dict[str, Any]] = []
        for said in person_said(prompt):
            for pattern, memory in self.rules:
                if re.search(pattern, said.text, re.IGNORECASE):
                    found.append(memory | {"evidence_message_ids": [said.id]})
        return {"memories": found}
