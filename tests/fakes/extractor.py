"""A stand-in for the fast model's `record_memories` answer: rules over the person's
messages exactly as the extraction prompt quotes them (ids, authors, local times)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.llm import LLMRequest

_MESSAGE = re.compile(
    r"^\[#(?P<id>\d+) \| (?P<who>[^|]+) \| [^\]]+\]\n(?P<body>(?:  .*\n?)*)", re.MULTILINE
)


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
        conversation = prompt.split("<conversation>", 1)[-1]
        found: list[dict[str, Any]] = []
        for match in _MESSAGE.finditer(conversation):
            if not match["who"].startswith("THE PERSON"):
                continue
            for pattern, memory in self.rules:
                if re.search(pattern, match["body"], re.IGNORECASE):
                    found.append(memory | {"evidence_message_ids": [int(match["id"])]})
        return {"memories": found}
