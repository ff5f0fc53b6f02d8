"""Staying within Telegram's flood limits: under 30 messages a second overall (paced, never
more in any one second), about one a second in a chat (short bursts allowed), 20 a minute in a
group; a `RetryAfter` answer is waited out and retried a bounded number of times.

The overall pace is the bot's, not a process's: every process sending with one token (a
webhook fleet, a scheduler process beside the adapter) takes its slots from one row in
the database (`SharedPace`), and falls back to its own pace while the database does not
answer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any, Protocol

import structlog
from aiolimiter import AsyncLimiter
from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

log = structlog.get_logger(__name__)

JSONDict = dict[str, Any]
MAX_LIMITERS = 2048
OVERALL_PER_SECOND = 28
"""Messages a second to all chats together: under Telegram's 30, so that the network's
jitter (a message sent earlier arriving later) never puts 31 into one of its seconds."""


def retry_after_seconds(exc: RetryAfter) -> float:
    """The wait Telegram asked for, in seconds (an int or a timedelta, by PTB setting)."""
    value: object = exc.retry_after
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)  # type: ignore[arg-type]


def _posts_to_chat(endpoint: str) -> bool:
    """Calls that put something in a chat count toward the limits (typing does not: at
    a thousand conversations, typing calls used up the overall budget and held every
    reply back by a second)."""
    lowered = endpoint.lower()
    return (lowered.startswith("send") and lowered != "sendchataction") or lowered.startswith(
        "edit"
    )


class Pace:
    """Messages one after another, `1 / per_second` apart: never more than `per_second` in
    any one second, even when a wave of replies comes after a quiet spell (a bucket that
    filled while idle would let a burst through on top of the steady rate)."""

    def __init__(self, per_second: float) -> None:
        self.gap = 1 / per_second + 1e-6  # a microsecond more: summed gaps never fall short
        self._next = float("-inf")

    async def __aenter__(self) -> None:
        now = asyncio.get_running_loop().time()
        slot = max(now, self._next)
        self._next = slot + self.gap  # taken even if the caller is cancelled: never early
        if slot > now:
            await asyncio.sleep(slot - now)

    async def __aexit__(self, *_: object) -> None:
        return None


class SendSlots(Protocol):
    """The database's send paces (`memory.store.coordination`)."""

    async def take_send_slot(self, key: str, *, gap: float) -> float: ...


class SharedPace:
    """`Pace` kept in the database for every process sending as one bot (`key`): each
    message takes the next free slot, `1 / per_second` after the one before, whichever
    process took that, and waits for it (and for this process's own `Pace`). When the
    database does not answer within `timeout`, the process paces on its own for
    `recheck` seconds, then asks again: a message is never held back by an outage."""

    def __init__(
        self,
        slots: SendSlots,
        key: str,
        per_second: float,
        *,
        timeout: float = 0.5,
        recheck: float = 30.0,
    ) -> None:
        self._slots = slots
        self._key = key
        self._local = Pace(per_second)
        self._timeout = timeout
        self._recheck = recheck
        self._alone_until = float("-inf")

    async def __aenter__(self) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() >= self._alone_until:
            try:
                async with asyncio.timeout(self._timeout):
                    wait = await self._slots.take_send_slot(self._key, gap=self._local.gap)
            except Exception as exc:  # the database is down or slow: pace alone a while
                log.warning("telegram.pace_alone", error=type(exc).__name__, seconds=self._recheck)
                self._alone_until = loop.time() + self._recheck
            else:
                if wait > 0:
                    await asyncio.sleep(wait)
        # This process's own pace as well: the slots are spaced on the database's clock,
        # but each reaches the process after its own round trip, and a slow one followed
        # by quick ones would bunch messages into one second.
        await self._local.__aenter__()

    async def __aexit__(self, *_: object) -> None:
        return None


class FloodControl(BaseRateLimiter[int]):
    """A python-telegram-bot rate limiter for every request the bot makes."""

    def __init__(
        self,
        *,
        overall_per_second: float = OVERALL_PER_SECOND,
        chat_burst: int = 3,
        chat_per_second: float = 1,
        group_per_minute: float = 20,
        max_retries: int = 3,
        max_wait: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        overall: AbstractAsyncContextManager[None] | None = None,
    ) -> None:
        """`overall` paces every message to any chat (`SharedPace` for a bot that several
        processes send as); by default this process's own `Pace(overall_per_second)`."""
        self._overall = overall or Pace(overall_per_second)
        self._chat_burst = chat_burst
        self._chat_period = chat_burst / chat_per_second
        self._group_per_minute = group_per_minute
        self._max_retries = max_retries
        self._max_wait = max_wait
        self._sleep = sleep
        self._chats: dict[int | str, AsyncLimiter] = {}

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, bool | JSONDict | list[JSONDict]]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> bool | JSONDict | list[JSONDict]:
        """Run the request within the limits; wait out and retry `RetryAfter`."""
        retries = self._max_retries if rate_limit_args is None else rate_limit_args
        chat = data.get("chat_id")
        for attempt in range(retries + 1):
            try:
                async with self._limits(chat, endpoint):
                    return await callback(*args, **kwargs)
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                if attempt >= retries or wait > self._max_wait:
                    raise
                log.warning("telegram.retry_after", seconds=wait, attempt=attempt + 1)
                await self._sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    @contextlib.asynccontextmanager
    async def _limits(self, chat: object, endpoint: str) -> AsyncIterator[None]:
        if chat is None:
            yield
            return
        if not _posts_to_chat(endpoint):
            yield  # typing is no message: it counts toward neither limit
            return
        async with self._chat_limiter(chat), self._overall:
            yield

    def _chat_limiter(self, chat: object) -> AsyncLimiter:
        key: int | str = chat if isinstance(chat, int) else str(chat)
        limiter = self._chats.get(key)
        if limiter is None:
            if len(self._chats) >= MAX_LIMITERS:
                self._forget_idle()
            group = isinstance(key, str) or key < 0
            limiter = (
                AsyncLimiter(self._group_per_minute, 60)
                if group
                else AsyncLimiter(self._chat_burst, self._chat_period)
            )
            self._chats[key] = limiter
        return limiter

    def _forget_idle(self) -> None:
        for key, limiter in list(self._chats.items()):
            if limiter.has_capacity(limiter.max_rate):
                del self._chats[key]
