"""Reading back the messages a prompt quotes as `<message>` elements
(`memory.person_words`), as a fake model would: who wrote each, its id and
time, and its text unescaped."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

_MESSAGE = re.compile(
    r'<message(?P<attributes>(?: [a-z_]+="[^"]*")*)>(?P<text>.*?)</message>', re.DOTALL
)
_ATTRIBUTE = re.compile(r' ([a-z_]+)="([^"]*)"')


@dataclass(frozen=True, slots=True)
class Quoted:
    """One quoted message: `sender` is `person` or `companion`; `id` and `at` may be
    missing (a prompt that does not show them)."""

    sender: str
    text: str
    id: int | None = None
    at: str | None = None


def quoted_messages(prompt: str) -> list[Quoted]:
    """Every `<message>` element of the prompt, in order."""
    found = []
    for match in _MESSAGE.finditer(prompt):
        attributes = {k: html.unescape(v) for k, v in _ATTRIBUTE.findall(match["attributes"])}
        found.append(
            Quoted(
                sender=attributes.get("from", ""),
                text=html.unescape(match["text"]),
                id=int(attributes["id"]) if "id" in attributes else None,
                at=attributes.get("at"),
            )
        )
    return found


def person_said(prompt: str) -> list[Quoted]:
    """The person's quoted messages (not the companion's)."""
    return [m for m in quoted_messages(prompt) if m.sender == "person"]
