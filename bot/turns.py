"""One turn at a time per person: a message that arrives while the last one is being
answered waits, then sees that answer in its context instead of answering it again.

`TurnLocks` serialises a person's turns inside one process; `SharedTurnLocks` also
across every process on the database (a claim row with a lease, renewed while the turn
runs): several webhook processes behind a load balancer, or Discord shards, then answer
a person one turn at a time too, and a process that dies mid-turn holds nobody for
longer than the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import AsyncIterator
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)


class TurnLocks:
    """A lock per person, kept only while someone holds or waits for it (in-process)."""

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


class TurnClaims(Protocol):
    """Where a person's turn is claimed across processes (`memory.store.coordination`)."""

    async def claim_turn(
        self, user_id: int, holder: str, *, lease: float, holder_key: int | None = None
    ) -> bool: ...

    async def keep_alive(self, key: int, held: asyncio.Event) -> None: ...

    async def renew_turn(self, user_id: int, holder: str, *, lease: float) -> bool: ...

    async def release_turn(self, user_id: int, holder: str) -> None: ...


def process_holder() -> str:
    """A name for this process's claims: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class SharedTurnLocks(TurnLocks):
    """The in-process lock first (one waiter per person per process), then the person's
    claim in the database, polled until free; renewed every third of `lease` while held,
    released after. The process keeps a liveness lock (a session advisory lock on a
    connection of its own): a claim whose holder's liveness lock is gone (the process
    died, its connection closed) is free at once, else once its lease runs out."""

    def __init__(
        self,
        claims: TurnClaims,
        *,
        lease: float = 30.0,
        poll_first: float = 0.02,
        poll_most: float = 0.25,
        holder: str | None = None,
    ) -> None:
        super().__init__()
        self._claims = claims
        self._lease = lease
        self._poll = (poll_first, poll_most)
        self.holder = holder or process_holder()
        self.holder_key = secrets.randbits(62) + 1
        self._alive = asyncio.Event()
        self._liveness: asyncio.Task[None] | None = None
        self._cleanups: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        """Let go of the liveness lock (claims still held run out with their lease)."""
        if self._liveness is not None:
            self._liveness.cancel()
            with contextlib.suppress(BaseException):
                await self._liveness
            self._liveness = None

    async def _keep_alive(self) -> None:
        """Start (or restart, after a lost connection) the liveness lock; a moment's wait
        for it, else claims go without it (they then wait for the lease alone)."""
        if self._liveness is not None and not self._liveness.done():
            return
        if self._liveness is not None and not self._liveness.cancelled():
            failed = self._liveness.exception()
            if failed is not None:
                log.warning("turns.liveness_lost", error=type(failed).__name__)
        self._liveness = asyncio.create_task(self._claims.keep_alive(self.holder_key, self._alive))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self._alive.wait()

    @contextlib.asynccontextmanager
    async def hold(self, user_id: int) -> AsyncIterator[None]:
        """Hold the person's turn in this process and across processes."""
        async with super().hold(user_id):
            await self._claim(user_id)
            renewing = asyncio.create_task(self._renew(user_id))
            try:
                yield
            finally:
                renewing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewing
                try:
                    await asyncio.shield(self._claims.release_turn(user_id, self.holder))
                except Exception as exc:  # the lease runs out on its own
                    log.warning("turns.release_failed", error=type(exc).__name__)

    async def _claim(self, user_id: int) -> None:
        await self._keep_alive()
        wait, most = self._poll
        while not await self._claim_once(user_id):
            await asyncio.sleep(wait)
            wait = min(most, wait * 2)

    async def _claim_once(self, user_id: int) -> bool:
        """One claim statement, never cancelled midway (a cancelled asyncpg statement
        spoils its pooled connection); a claim won after the wait was cancelled is
        released at once."""
        claim = asyncio.ensure_future(
            self._claims.claim_turn(
                user_id,
                self.holder,
                lease=self._lease,
                holder_key=self.holder_key if self._alive.is_set() else None,
            )
        )
        try:
            return await asyncio.shield(claim)
        except asyncio.CancelledError:
            cleanup = asyncio.create_task(self._release_if_won(claim, user_id))
            self._cleanups.add(cleanup)
            cleanup.add_done_callback(self._cleanups.discard)
            raise

    async def _release_if_won(self, claim: asyncio.Future[bool], user_id: int) -> None:
        with contextlib.suppress(Exception):
            if await claim:
                await self._claims.release_turn(user_id, self.holder)

    async def _renew(self, user_id: int) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                kept = await asyncio.shield(
                    self._claims.renew_turn(user_id, self.holder, lease=self._lease)
                )
            except Exception as exc:
                log.warning("turns.renew_failed", error=type(exc).__name__)
                continue
            if not kept:
                log.warning("turns.claim_lost")
                return
