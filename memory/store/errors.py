"""Errors of the memory layer, named for what the caller should do.

`memory` imports nothing from `bot`, so these stand alone; `bot` maps them onto its
`CompanionError` hierarchy at its edge (e.g. `MemoryNotFound` → `NotFound`).

MemoryStoreError
├── MemoryNotFound      no such memory (or event) for this person: say so
├── PinLimitReached     too many pinned memories: ask the person to unpin one
├── NothingToUndo       the change was already undone or cannot be undone
├── NotAboutThePerson   a claim over the companion, not a fact of a life: save nothing
├── AnswerTruncated     the model's answer was cut off at its token limit: store none of
│                       it; ask again with a larger limit or less input
└── EmbedderMismatch    the stored vectors come from another embedder: do not start;
                        configure that one again, or re-embed everything
"""

from __future__ import annotations

from dataclasses import dataclass


class MemoryStoreError(Exception):
    """Base of every error the memory layer raises on purpose."""


class MemoryNotFound(MemoryStoreError):
    """No such memory or memory event for this person (another person's id included)."""


class PinLimitReached(MemoryStoreError):
    """The person already has `limit` pinned memories."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"at most {limit} memories can be pinned")
        self.limit = limit


class NothingToUndo(MemoryStoreError):
    """The event was already undone, or things moved on so it cannot be undone."""


class NotAboutThePerson(MemoryStoreError):
    """What was to be remembered claims power over the companion (a role, its rules,
    other people's data): memory keeps facts of a person's life, so nothing is saved."""


class AnswerTruncated(MemoryStoreError):
    """A `ToolCaller` answer stopped at its token limit: it may be missing items, so none
    of it is used (raised by the `ToolCaller`, not by the model's content)."""


@dataclass(frozen=True, slots=True)
class EmbedderSpec:
    """An embedder as the stored vectors depend on it: its name and its width."""

    name: str
    dim: int


class EmbedderMismatch(MemoryStoreError):
    """The stored vectors were made by `recorded`, but `configured` is set up now."""

    def __init__(self, recorded: EmbedderSpec, configured: EmbedderSpec) -> None:
        super().__init__(
            f"stored vectors come from {recorded.name} ({recorded.dim} dimensions), "
            f"the configured embedder is {configured.name} ({configured.dim} dimensions)"
        )
        self.recorded = recorded
        self.configured = configured
