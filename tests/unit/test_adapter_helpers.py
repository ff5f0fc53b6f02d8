"""Splitting, burst coalescing and rate limiting, shared by the platform adapters."""

from __future__ import annotations

import asyncio

from adapters.bursts import BurstCoalescer
from adapters.ratelimit import RateLimiter
from adapters.splitting import split_text


def test_short_text_is_one_piece() -> None:
    assert split_text("hello", 10) == ["hello"]


def test_split_prefers_paragraphs_then_sentences() -> None:
    text = "First para one. Second sentence.\n\nSecond para here."
    assert split_text(text, 35) == ["First para one. Second sentence.", "Second para here."]
    assert split_text("One two. Three four. Five six.", 20) == ["One two. Three four.", "Five six."]


def test_split_never_exceeds_the_limit_and_loses_no_words() -> None:
    text = ("word " * 2000) + "\n\n" + ("Sentence number. " * 500) + "x" * 9000
    pieces = split_text(text, 4096)
    assert all(0 < len(p) <= 4096 for p in pieces)
    assert "".join(pieces).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace(
        "\n", ""
    )


async def test_a_burst_is_stored_at_once_and_answered_once() -> None:
    stored: list[str] = []
    answered: list[str] = []

    async def store(item: str) -> None:
        stored.append(item)

    async def answer(item: str) -> None:
        answered.append(item)

    bursts: BurstCoalescer[str] = BurstCoalescer(store=store, answer=answer, window=0.05)
    for word in ("a", "b", "c"):
        await bursts.add("alice", word)
    await bursts.add("bob", "x")
    assert stored == ["a", "b", "c", "x"] and answered == []
    await asyncio.sleep(0.12)
    assert sorted(answered) == ["c", "x"]


async def test_flush_answers_waiting_bursts() -> None:
    answered: list[str] = []

    async def noop(item: str) -> None:
        return None

    async def answer(item: str) -> None:
        answered.append(item)

    bursts: BurstCoalescer[str] = BurstCoalescer(store=noop, answer=answer, window=60)
    await bursts.add("alice", "hi")
    await bursts.flush()
    assert answered == ["hi"]


def test_rate_limiter_refills_over_time() -> None:
    now = [0.0]
    limiter = RateLimiter(per_minute=60, burst=2, clock=lambda: now[0])
    assert limiter.allow("a") and limiter.allow("a") and not limiter.allow("a")
    assert limiter.allow("b")
    now[0] += 1.0
    assert limiter.allow("a") and not limiter.allow("a")
