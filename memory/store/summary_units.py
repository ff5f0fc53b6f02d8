"""A session summary as recall units: its sentences, each embedded on its own.

A summary of a long conversation tells of many things; one vector for all of it matches
none of them well. Each sentence ("Melanie took her kids to the museum") is a unit that
a question can match, and the session is ranked by its best one (`memory.recall.
retrieval`). Written when the summary is, by whoever writes it; without an embedder (or
when it fails) a summary simply has no units and is found by its words alone.
"""

from __future__ import annotations

import re

import structlog
from pgvector import Vector

from memory.store.ports import Embedder, EmbeddingError

log = structlog.get_logger(__name__)

MAX_UNITS = 40  # sentences embedded per summary (a summary is at most a few thousand chars)
MIN_CHARS = 12  # shorter pieces ("Yes.") say nothing a question could match
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"”')\]]*\s+|\n+")


def summary_sentences(summary: str) -> list[str]:
    """The summary's sentences (split after . ! ? and at line breaks), the tiny ones
    dropped, at most `MAX_UNITS` of them."""
    pieces = (p.strip() for p in _SENTENCE_END.split(summary))
    return [p for p in pieces if len(p) >= MIN_CHARS][:MAX_UNITS]


async def summary_vectors(embedder: Embedder | None, summary: str) -> list[Vector] | None:
    """One unit vector per sentence of `summary` (pgvector's own type, so that the array
    of them binds as `vector[]`); None without an embedder, sentences, or when embedding
    fails (logged: the summary is then found by its words alone)."""
    sentences = summary_sentences(summary)
    if embedder is None or not sentences:
        return None
    try:
        rows = await embedder.embed(sentences)
    except EmbeddingError as exc:
        log.warning("memory.summary_units_failed", error=type(exc).__name__)
        return None
    return [Vector([float(x) for x in row]) for row in rows]
