"""Answering a burst of messages once.

Each message is stored the moment it arrives (nothing is lost); the person's turn is
answered only after they have been quiet for `window` seconds, as one turn.

With `shared` (the database), the quiet time counts every process's messages: a person's
quick messages spread over several processes by a load balancer make one burst, and the
burst is answered once they have been quiet for `window` everywhere (the turn lock and
the stored statuses keep the processes from answering it twice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")
MAX_QUIET_CHECKS = 50
"""How many times a burst waits again for messages stored by other processes (then it is
answered anyway: someone who never stops writing is still answered)."""


class SharedQuiet(Protocol):
    """When the last message of a burst arrived, across processes."""

    async def mark_burst(self, key: str) -> None: ...

    async def quiet_seconds(self, key: str) -> float | None: ...


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
        shared: SharedQuiet | None = None,
        name: str = "",
    ) -> None:
        self._store = store
        self._answer = answer
        self._window = window
        self._pending: dict[Hashable, _Pending[T]] = {}
        self._shared = shared
        self._name = name

    async def add(self, key: Hashable, item: T) -> None:
        """Store `item` now; (re)start the quiet timer of `key`."""
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending(item)
        else:
            pending.latest = item
        await self._store(item)
        if self._shared is not None:
            await self._shared.mark_burst(self._shared_key(key))
        # Cancel after the await: a concurrent `add` may have started a timer meanwhile.
        if pending.timer is not None:
            pending.timer.cancel()
        pending.timer = asyncio.create_task(self._fire(key, pending))

    async def _fire(self, key: Hashable, pending: _Pending[T]) -> None:
        await asyncio.sleep(self._window)
        if self._shared is not None:
            await self._quiet_everywhere(key)
        if self._pending.get(key) is pending:
            del self._pending[key]
        await self._answer(pending.latest)

    def _shared_key(self, key: Hashable) -> str:
        parts = key if isinstance(key, tuple) else (key,)
        return ":".join([self._name, *map(str, parts)])

    async def _quiet_everywhere(self, key: Hashable) -> None:
        """Wait until no process stored a message of the burst for `window` seconds."""
        assert self._shared is not None
        for _ in range(MAX_QUIET_CHECKS):
            try:
                # Shielded: a new message cancels this timer, never a statement midway.
                quiet = await asyncio.shield(self._shared.quiet_seconds(self._shared_key(key)))
            except Exception as exc:  # answer as one process would
                log.warning("bursts.quiet_unknown", error=type(exc).__name__)
                return
            if quiet is None or quiet >= self._window:
                return
            await asyncio.sleep(self._window - quiet)

    async def flush(self) -> None:
        """Answer every waiting burst now (e.g. on shutdown)."""
        pending = list(self._pending.values())
        self._pending.clear()
        for item in pending:
            if item.timer is not None:
                item.timer.cancel()
        await asyncio.gather(*(self._answer(p.latest) for p in pending))
