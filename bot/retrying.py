"""What both model clients share around a request: how long a server asked us to wait,
jittered exponential backoff, and the metrics and log lines of a completion, a retry and
giving up."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from bot import metrics
from bot.llm import Completion

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]
"""How a client waits between attempts (`asyncio.sleep`, or a test's clock)."""


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


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often a model client retries, how long it backs off, and the most it waits
    when a server asks for longer."""

    max_retries: int
    backoff: float
    max_backoff: float
    max_retry_after: float

    def delay(
        self, attempt: int, *, retryable: bool, retry_after: str | None = None
    ) -> float | None:
        """Seconds to wait before retry `attempt` (0 for the first), or None to give up:
        the server's `retry-after` (capped) when it sent one, else jittered backoff."""
        if attempt >= self.max_retries or not retryable:
            return None
        asked = retry_after_seconds(retry_after)
        if asked is not None:
            return min(asked, self.max_retry_after)
        return jittered_backoff(attempt, self.backoff, self.max_backoff)


def record_completion(completion: Completion, *, role: str, elapsed: float, **fields: Any) -> None:
    """Count a successful model request and log it (tokens, stop reason, latency) with
    the client's own `fields`."""
    metrics.record_llm_call(completion.model, elapsed, completion.usage)
    log.info(
        "llm.completed",
        model=completion.model,
        role=role,
        input_tokens=completion.usage.input_tokens,
        output_tokens=completion.usage.output_tokens,
        cache_read_tokens=completion.usage.cache_read_tokens,
        stop_reason=completion.stop_reason,
        tool_calls=len(completion.tool_calls),
        latency_ms=round(elapsed * 1000),
        **fields,
    )


def wait_or_give_up(
    delay: float | None,
    *,
    error: Exception,
    cause: Exception,
    attempt: int,
    model: str,
    status: int | str,
    **fields: Any,
) -> float:
    """`delay`, logged as a retry; when it is None the failure is counted and logged and
    `error` is raised from `cause`."""
    if delay is None:
        metrics.record_llm_failure(model, status)
        log.warning("llm.failed", model=model, status=status, attempts=attempt, **fields)
        raise error from cause
    log.warning(
        "llm.retry", model=model, status=status, attempt=attempt, delay_s=round(delay, 3), **fields
    )
    return delay
