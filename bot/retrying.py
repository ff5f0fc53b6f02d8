"""The retry arithmetic both model clients share: how long a server asked us to wait,
and jittered exponential backoff."""

from __future__ import annotations

import random


def retry_after_seconds(header: str | None) -> float | None:
    """`retry-after` as seconds; None when absent, negative or an HTTP date."""
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def jittered_backoff(attempt: int, base: float, maximum: float) -> float:
    """Seconds before retry `attempt`: doubling from `base`, capped at `maximum`, drawn
    from the upper half so clients that failed together do not retry together."""
    ceiling = min(base * 2**attempt, maximum)
    return random.uniform(ceiling / 2, ceiling)
