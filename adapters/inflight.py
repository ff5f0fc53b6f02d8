"""Turns being answered right now, so a shutdown can let them finish first (shared by
the platform adapters)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator


class InFlight:
    """Counts running turns; `wait` returns once none is left (or the time is up)."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        """Count the block as one turn in flight."""
        self._count += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._count -= 1
            if self._count == 0:
                self._idle.set()

    async def wait(self, seconds: float) -> bool:
        """Wait until nothing is in flight; False if `seconds` passed first."""
        try:
            async with asyncio.timeout(seconds):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    def __len__(self) -> int:
        return self._count
