"""Remembered items as plain values: what repositories return and extraction produces."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

CORE_CATEGORIES: Final = frozenset({"identity", "fact", "relationship", "preference"})
ACTIVE_CATEGORIES: Final = frozenset({"thread", "goal", "emotion", "event"})
CATEGORIES: Final = CORE_CATEGORIES | ACTIVE_CATEGORIES
TIERS: Final = frozenset({"core", "active"})
SOURCES: Final = frozenset({"user", "extracted", "companion"})
ACTORS: Final = frozenset({"user", "extraction", "companion", "patrol"})
LIVE_STATUSES: Final = ("active", "dying")


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One stored memory (one version of it: updates are new rows)."""

    id: int
    short_id: int
    user_id: int
    tier: str
    category: str
    content: str
    importance: float
    confidence: float
    source: str
    pinned: bool
    status: str
    event_at: datetime | None
    expires_at: datetime | None
    valid_from: datetime
    valid_until: datetime | None
    created_at: datetime
    thread_id: int | None = None
    superseded_by: int | None = None
    source_message_ids: tuple[int, ...] = ()
    last_confirmed_at: datetime | None = None
    mention_count: int = 1
    unsure: bool = False

    @property
    def label(self) -> str:
        """The id people see and type, like `m12`."""
        return f"m{self.short_id}"

    @property
    def live(self) -> bool:
        """Current (not superseded) and not forgotten, dead or archived."""
        return self.valid_until is None and self.status in LIVE_STATUSES


@dataclass(frozen=True, slots=True)
class Candidate:
    """Something to remember, before it is stored."""

    content: str
    category: str
    tier: str
    importance: float
    confidence: float
    event_at: datetime | None = None
    expires_at: datetime | None = None
    source_message_ids: tuple[int, ...] = ()
    thread_id: int | None = None
    unsure: bool = False
    """Extracted with middling confidence: kept recall-only until the person confirms it."""


@dataclass(frozen=True, slots=True)
class MemoryEventRecord:
    """One audit-trail entry: who did what to which memory, with what undo needs."""

    id: int
    user_id: int
    memory_id: int | None
    action: str
    actor: str
    details: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryHistory:
    """Every version of a memory, oldest first, and the events that touched them."""

    versions: tuple[MemoryItem, ...]
    events: tuple[MemoryEventRecord, ...]


@dataclass(frozen=True, slots=True)
class UpdateQuestion:
    """A question to put to the person: their new statement changes a memory they set
    explicitly or pinned (`memory_label`, `old`); should `new` replace it?"""

    id: int
    memory_label: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class ExtractionOutcome:
    """What one extraction run did; `items` are the rows it stored (new or new versions),
    `questions` the updates to explicit or pinned memories the person is to be asked."""

    added: int = 0
    updated: int = 0
    skipped: int = 0
    items: tuple[MemoryItem, ...] = ()
    failed: bool = False
    questions: tuple[UpdateQuestion, ...] = ()


_SPACE = re.compile(r"\s+")
_EDGE_PUNCTUATION = " .,;:!?\"'`“”‘’()[]"


def normalise_text(text: str) -> str:
    """Case-, space- and edge-punctuation-insensitive form used for exact duplicates."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", folded).strip(_EDGE_PUNCTUATION)


def content_hash(text: str) -> str:
    """SHA-256 (hex) of the normalised text."""
    return hashlib.sha256(normalise_text(text).encode()).hexdigest()
