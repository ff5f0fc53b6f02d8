"""A per-person rate limit that protects the model budget (a token bucket)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

RATE_LIMITED = "You're sending messages faster than I can think! Give me a moment, then try again."


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
