"""A per-person rate limit that protects the model budget (a token bucket): in this
process (`RateLimiter`), or shared by every process on the database
(`SharedRateLimiter`, what `companion run` uses)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.bootstrap import Core

RATE_LIMITED = "You're sending messages faster than I can think! Give me a moment, then try again."


class Limiter(Protocol):
    """Takes a token for a person (their platform id); False when over the limit."""

    async def take(self, key: Hashable) -> bool: ...


class TokenBuckets(Protocol):
    """The database's buckets (`memory.store.coordination`)."""

    async def take_token(self, key: str, *, per_minute: float, burst: int) -> bool: ...


class SharedRateLimiter:
    """The token bucket in the database: `burst` at once and `per_minute` on average, per
    person and platform, however many processes their messages reach."""

    def __init__(
        self, buckets: TokenBuckets, *, platform: str, per_minute: float = 20, burst: int = 8
    ) -> None:
        self._buckets = buckets
        self._platform = platform
        self._per_minute = per_minute
        self._burst = burst

    async def take(self, key: Hashable) -> bool:
        """Take one token for `key`; False when the bucket is empty."""
        return await self._buckets.take_token(
            f"{self._platform}:{key}", per_minute=self._per_minute, burst=self._burst
        )


class RateLimiter:
    """Allows `burst` messages at once and `per_minute` on average, per key."""

    def __init__(
        self,
        *,
        per_minute: float = 20,
        burst: int = 8,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: dict[Hashable, tuple[float, float]] = {}

    async def take(self, key: Hashable) -> bool:
        """`allow`, as the `Limiter` the adapters use."""
        return self.allow(key)

    def allow(self, key: Hashable) -> bool:
        """Take one token for `key`; False when the bucket is empty."""
        now = self._clock()
        tokens, last = self._buckets.get(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - last) * self._rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return False
        if len(self._buckets) >= self._max_keys and key not in self._buckets:
            self._buckets.clear()  # bounded memory; a full reset only forgives
        self._buckets[key] = (tokens - 1, now)
        return True


def limiter_for(core: Core, platform: str) -> Limiter:
    """The rate limit of `platform`'s adapter: shared by every process on the database."""
    per_minute = core.settings.rate_limit_per_minute
    if core.coordination is None:
        return RateLimiter(per_minute=per_minute)
    return SharedRateLimiter(core.coordination, platform=platform, per_minute=per_minute)
