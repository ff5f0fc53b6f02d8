"""How long a turn spends outside the language model.

1,000 turns through the real core (router, storage, prompt building) on the embedded
PostgreSQL, with a model that answers instantly. Run: `python -m bench.turn_overhead`.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bot.bootstrap import build_core
from bot.config import Settings
from bot.domain import IncomingMessage
from bot.llm import Completion, LLMRequest, ToolCall, Usage

TURNS = 1000
PEOPLE = 50


class InstantLLM:
    """A model with zero latency: replies at once, and answers the background work's
    forced tool calls (memory extraction) with nothing to note, so that work runs its
    real course alongside the turns instead of failing and being retried."""

    async def complete(self, request: LLMRequest) -> Completion:
        """Answer at once."""
        if request.force_tool is not None:
            call = ToolCall(id="call-1", name=request.force_tool, input={"memories": []})
            return Completion(text="", model="instant", usage=Usage(1, 1), tool_calls=(call,))
        return Completion(
            text="That sounds good — tell me more.", model="instant", usage=Usage(1, 1)
        )


def percentile(values: list[float], fraction: float) -> float:
    """The value below which `fraction` of `values` lie."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(turns: int) -> list[float]:
    """Milliseconds per turn, after a warm-up."""
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(data_dir=Path(data_dir), log_level="WARNING")
        core = await build_core(settings, llm=InstantLLM())
        try:
            for i in range(PEOPLE):  # warm-up: every person exists, pools are warm
                await core.router.handle(_message(i, "hello"))
            timings = []
            for i in range(turns):
                incoming = _message(i % PEOPLE, f"Today I did thing number {i} at work.")
                started = time.perf_counter()
                await core.router.handle(incoming)
                timings.append((time.perf_counter() - started) * 1000)
            return timings
        finally:
            await core.aclose()


def _message(person: int, text: str) -> IncomingMessage:
    return IncomingMessage(
        platform="bench", platform_user_id=f"p{person}", chat_id=f"c{person}", text=text
    )


def main() -> None:
    """Print the report."""
    from bot.logs import configure_logging

    configure_logging("WARNING", "console")
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else TURNS
    timings = asyncio.run(measure(turns))
    p50, p95, p99 = (percentile(timings, q) for q in (0.5, 0.95, 0.99))
    print(f"turn overhead outside the LLM, {turns} turns, {PEOPLE} people, embedded PostgreSQL")
    print(f"  mean {statistics.fmean(timings):.2f} ms  p50 {p50:.2f} ms  p95 {p95:.2f} ms")
    print(f"  p99 {p99:.2f} ms  max {max(timings):.2f} ms  (target p95 <= 10 ms)")
    out = os.environ.get("COMPANION_BENCH_OUT")
    if out:
        data = {"latencies_ms": {"turn_overhead": timings}}
        (Path(out) / "turn_overhead.json").write_text(json.dumps(data))
    print(f"figure turn_overhead_p50 {p50:.2f} ms")
    print(f"figure turn_overhead_p95 {p95:.2f} ms")


if __name__ == "__main__":
    main()
