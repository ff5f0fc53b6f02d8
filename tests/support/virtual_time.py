"""An asyncio event loop on virtual time: whenever nothing is ready to run, its clock
jumps straight to the next timer, so code that sleeps or rate-limits for seconds runs
in milliseconds and its timing is exact.

For code that only waits on timers (no sockets): `run_virtual(coro)` runs it.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.SelectSelector):
    """A selector that, instead of waiting for a timeout, moves the loop's clock."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:  # no timer pending: only I/O can wake the loop
            return list(super().select(None))
        events = list(super().select(0))
        if not events:
            self.now += timeout
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose `time()` is virtual (starts at 0)."""

    def __init__(self) -> None:
        self._jumping = _JumpingSelector()
        super().__init__(self._jumping)

    def time(self) -> float:
        """Virtual seconds since the loop was made."""
        return float(self._jumping.now)


def run_virtual(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on a fresh virtual-time loop."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(coro)
