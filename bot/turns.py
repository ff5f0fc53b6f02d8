"""One turn at a time per person: a message that arrives while the last one is being
answered waits, then sees that answer in its context instead of answering it again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class TurnLocks:
    """A lock per person, kept only while someone holds or waits for it.

    In-process: a person's updates reach one process (one poller, one gateway shard);
    across processes the stored message statuses still keep answers from repeating.
    """

    def __init__(self) -> None:
        self._locks: dict[int, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, user_id: int) -> AsyncIterator[None]:
        """Wait for the person's previous turn to finish, then hold theirs."""
        lock, users = self._locks.get(user_id, (asyncio.Lock(), 0))
        self._locks[user_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[user_id]
            if users == 1:
                del self._locks[user_id]
            else:
                self._locks[user_id] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
