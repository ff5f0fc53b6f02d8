"""How long a turn spends outside the language model.

1,000 turns through the real core (router, storage, prompt building) on the embedded
PostgreSQL, with a model that answers instantly (the turn includes claiming the person's
turn across processes, a lease row). Then the cross-process coordination alone, the two
ways it can be done, per turn: a lease row (claim + release, what `companion run` uses)
and a transaction-scoped advisory lock (a connection and transaction held for the turn);
and everything a message adds across processes (rate-limit token, burst mark, quiet
check, turn claim and release). Run: `python -m bench.turn_overhead [turns]`.
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

from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.domain import IncomingMessage
from bot.llm import Completion, LLMRequest, ToolCall, Usage
from bot.turns import process_holder

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


async def measure(turns: int) -> tuple[list[float], dict[str, list[float]]]:
    """Milliseconds per turn, after a warm-up; then per coordination variant."""
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
            return timings, await _coordination(core, turns)
        finally:
            await core.aclose()


async def _coordination(core: Core, turns: int) -> dict[str, list[float]]:
    """Milliseconds per turn of each way to hold a person's turn across processes."""
    shared = core.coordination
    assert shared is not None
    people = await core.store.persons_by_ids(list(range(1, PEOPLE + 1)))
    ids = [p.id for p in people]
    holder = process_holder()
    found: dict[str, list[float]] = {"lease": [], "advisory": [], "per_message": []}
    for i in range(turns):
        user = ids[i % len(ids)]
        started = time.perf_counter()
        await shared.claim_turn(user, holder, lease=30)
        await shared.release_turn(user, holder)
        found["lease"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        async with shared.advisory_turn(user):
            pass
        found["advisory"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        key = f"bench:{user}:{user}"
        await shared.take_token(key, per_minute=20, burst=8)
        await shared.mark_burst(key)
        await shared.quiet_seconds(key)
        await shared.claim_turn(user, holder, lease=30)
        await shared.release_turn(user, holder)
        found["per_message"].append((time.perf_counter() - started) * 1000)
    return found


def _message(person: int, text: str) -> IncomingMessage:
    return IncomingMessage(
        platform="bench", platform_user_id=f"p{person}", chat_id=f"c{person}", text=text
    )


def main() -> None:
    """Print the report."""
    from bot.logs import configure_logging

    configure_logging("WARNING", "console")
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else TURNS
    timings, coordination = asyncio.run(measure(turns))
    p50, p95, p99 = (percentile(timings, q) for q in (0.5, 0.95, 0.99))
    print(f"turn overhead outside the LLM, {turns} turns, {PEOPLE} people, embedded PostgreSQL")
    print(f"  mean {statistics.fmean(timings):.2f} ms  p50 {p50:.2f} ms  p95 {p95:.2f} ms")
    print(f"  p99 {p99:.2f} ms  max {max(timings):.2f} ms  (target p95 <= 10 ms)")
    print("holding a person's turn across processes, per turn (no model, no contention):")
    for name, label in (
        ("lease", "lease row (claim + release)"),
        ("advisory", "advisory xact lock (begin, lock, commit)"),
        ("per_message", "all a message adds (token, burst mark, quiet, claim, release)"),
    ):
        values = coordination[name]
        print(f"  {label}: p50 {percentile(values, 0.5):.2f} ms  "
              f"p95 {percentile(values, 0.95):.2f} ms")  # fmt: skip
    out = os.environ.get("COMPANION_BENCH_OUT")
    if out:
        data = {"latencies_ms": {"turn_overhead": timings}}
        (Path(out) / "turn_overhead.json").write_text(json.dumps(data))
    print(f"figure turn_overhead_p50 {p50:.2f} ms")
    print(f"figure turn_overhead_p95 {p95:.2f} ms")
    print(f"figure turn_claim_lease_p95 {percentile(coordination['lease'], 0.95):.2f} ms")
    print(f"figure turn_claim_advisory_p95 {percentile(coordination['advisory'], 0.95):.2f} ms")
    print(
        f"figure coordination_per_message_p95 "
        f"{percentile(coordination['per_message'], 0.95):.2f} ms"
    )


if __name__ == "__main__":
    main()
