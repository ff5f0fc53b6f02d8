"""Opportunistic batching for an embedder that runs on this machine's cores.

One run at a time, in a worker thread: the texts of every call that arrives while a run
is going wait and go together in the next run. A lone call starts at once (nothing is
held back for company), so a quiet turn is as fast as before; under load (a wave of
replies to the morning check-in) the calls share runs, which costs far less CPU a text
than one run each, and the runs no longer compete for the two cores with each other.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from memory.store.ports import Vector


@dataclass(slots=True)
class _Call:
    texts: list[str]
    answer: asyncio.Future[Vector] = field(repr=False)


class Batcher:
    """Runs `run` (texts to unit rows, blocking) on the calls of one event loop, gathering
    those that wait into runs of at most `most` texts (a bigger call runs alone)."""

    def __init__(self, run: Callable[[list[str]], Vector], most: int) -> None:
        self._run = run
        self._most = max(1, most)
        self._waiting: deque[_Call] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str]) -> Vector:
        """The rows of `texts`, from the next run that has room for them."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (a test's, a bench's): start afresh
            self._loop, self._waiting, self._draining = loop, deque(), None
        call = _Call(list(texts), loop.create_future())
        self._waiting.append(call)
        if self._draining is None or self._draining.done():
            self._draining = loop.create_task(self._drain())
        return await call.answer

    async def _drain(self) -> None:
        while self._waiting:
            calls = self._next_run()
            if not calls:
                continue
            texts = [t for call in calls for t in call.texts]
            try:
                rows = await asyncio.to_thread(self._run, texts)
            except Exception as exc:  # every call of the run meets the embedder's error
                for call in calls:
                    if not call.answer.done():
                        call.answer.set_exception(exc)
                continue
            start = 0
            for call in calls:
                end = start + len(call.texts)
                if not call.answer.done():  # a caller that gave up (its deadline) is skipped
                    call.answer.set_result(rows[start:end])
                start = end

    def _next_run(self) -> list[_Call]:
        """The oldest waiting call still wanted, and those after it while the run has
        room."""
        calls: list[_Call] = []
        size = 0
        while self._waiting and (not calls or size + len(self._waiting[0].texts) <= self._most):
            call = self._waiting.popleft()
            if call.answer.done():  # its caller gave up while it waited: nothing to run
                continue
            calls.append(call)
            size += len(call.texts)
        return calls
