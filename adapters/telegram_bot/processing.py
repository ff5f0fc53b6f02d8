"""How updates run: concurrently across people but in arrival order for each person, and
a count of work in flight so a stop can wait for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from telegram import Update
from telegram.ext import BaseUpdateProcessor


@dataclass
class _Lane:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def person_key(update: object) -> int | None:
    """Whose update this is: the sender, else the chat; None for anything else."""
    if not isinstance(update, Update):
        return None
    if update.effective_user is not None:
        return update.effective_user.id
    if update.effective_chat is not None:
        return update.effective_chat.id
    return None


class PerPersonUpdateProcessor(BaseUpdateProcessor):
    """One person's updates one at a time, in order; different people concurrently."""

    def __init__(self, max_concurrent_updates: int = 64) -> None:
        super().__init__(max_concurrent_updates)
        self._lanes: dict[int, _Lane] = {}

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        """Wait for the person's earlier updates, then run this one."""
        key = person_key(update)
        if key is None:
            await coroutine
            return
        lane = self._lanes.setdefault(key, _Lane())
        lane.users += 1
        try:
            async with lane.lock:
                await coroutine
        finally:
            lane.users -= 1
            if lane.users == 0:
                del self._lanes[key]

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""
