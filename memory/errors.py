"""Errors of the memory layer, named for what the caller should do.

`memory` imports nothing from `bot`, so these stand alone; `bot` maps them onto its
`CompanionError` hierarchy at its edge (e.g. `MemoryNotFound` → `NotFound`).

MemoryStoreError
├── MemoryNotFound      no such memory (or event) for this person: say so
├── PinLimitReached     too many pinned memories: ask the person to unpin one
└── NothingToUndo       the change was already undone or cannot be undone
"""

from __future__ import annotations


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
