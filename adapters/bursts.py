"""Answering a burst of messages once.

Each message is stored the moment it arrives (nothing is lost); the person's turn is
answered only after they have been quiet for `window` seconds, as one turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Pending(Generic[T]):
    latest: T
    timer: asyncio.Task[None] | None = None
    stored: list[asyncio.Task[None]] = field(default_factory=list)


class BurstCoalescer(Generic[T]):
    """Calls `store` for every item at once and `answer` for the last of a burst."""

    def __init__(
        self,
        *,
        store: Callable[[T], Awaitable[None]],
        answer: Callable[[T], Awaitable[None]],
        window: float = 2.0,
    ) -> None:
        self._store = store
        self._answer = answer
        self._window = window
        self._pending: dict[Hashable, _Pending[T]] = {}

    async def add(self, key: Hashable, item: T) -> None:
        """Store `item` now; (re)start the quiet timer of `key`."""
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending(item)
        else:
            pending.latest = item
        await self._store(item)
        # Cancel after the await: a concurrent `add` may have started a timer meanwhile.
        if pending.timer is not None:
            pending.timer.cancel()
        pending.timer = asyncio.create_task(self._fire(key, pending))

    async def _fire(self, key: Hashable, pending: _Pending[T]) -> None:
        await asyncio.sleep(self._window)
        if self._pending.get(key) is pending:
            del self._pending[key]
        await self._answer(pending.latest)

    async def flush(self) -> None:
        """Answer every waiting burst now (e.g. on shutdown)."""
        pending = list(self._pending.values())
        self._pending.clear()
        for item in pending:
            if item.timer is not None:
                item.timer.cancel()
        await asyncio.gather(*(self._answer(p.latest) for p in pending))
