"""Splitting long replies for platforms with a message length limit."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut at paragraphs, then sentences, then words."""
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    current = ""
    for unit in _units(text, limit):
        joiner = "\n\n" if unit.startswith("\x00") else " "
        unit = unit.lstrip("\x00")
        candidate = f"{current}{joiner}{unit}" if current else unit
        if len(candidate) <= limit:
            current = candidate
        else:
            pieces.append(current)
            current = unit
    if current:
        pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]


def _units(text: str, limit: int) -> list[str]:
    """Sentences (a paragraph's first marked with NUL), each no longer than `limit`."""
    units: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        for i, sentence in enumerate(_SENTENCE_END.split(paragraph.strip())):
            for j, chunk in enumerate(_hard_wrap(sentence, limit)):
                units.append(("\x00" if i == 0 and j == 0 else "") + chunk)
    return units


def _hard_wrap(sentence: str, limit: int) -> list[str]:
    if len(sentence) <= limit:
        return [sentence]
    chunks: list[str] = []
    while len(sentence) > limit:
        cut = sentence.rfind(" ", 0, limit)
        cut = cut if cut > limit // 2 else limit
        chunks.append(sentence[:cut].rstrip())
        sentence = sentence[cut:].lstrip()
    return [*chunks, sentence] if sentence else chunks
