"""Work that must not delay a reply (extraction, summaries), run as tracked tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class BackgroundTasks:
    """Keeps references to fire-and-forget tasks, logs their failures, drains on exit."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._keys: dict[str, asyncio.Task[Any]] = {}

    def spawn(self, coro: Coroutine[Any, Any, Any], *, key: str) -> None:
        """Run `coro` in the background unless a task with the same key is running."""
        running = self._keys.get(key)
        if running is not None and not running.done():
            coro.close()
            return
        task = asyncio.create_task(coro, name=key)
        self._tasks.add(task)
        self._keys[key] = task
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if self._keys.get(task.get_name()) is task:
            del self._keys[task.get_name()]
        if not task.cancelled() and task.exception() is not None:
            log.error("background.failed", task=task.get_name(), exc_info=task.exception())

    async def drain(self) -> None:
        """Wait until every task (and any it spawned) has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def __len__(self) -> int:
        return len(self._tasks)
