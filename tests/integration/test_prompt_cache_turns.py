"""A conversation through `handle_message` reads the prompt cache from its second turn:
the real core, the real `AnthropicLLM` and SDK, the strict loopback Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import Core, build_core
from bot.config import Settings
from memory.store.items import Candidate
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.integration.conftest import says

CHAT_MODEL = "claude-sonnet-4-5-test"  # Sonnet 4.5's 1,024-token minimum; no SDK warning
FACTS = [
    f"They {what}, something they mentioned in a conversation a while ago ({n})"
    for n, what in enumerate(
        (
            "work as a nurse on a cardiology ward",
            "live in Aarhus with their partner Jonas",
            "have a grey cat called Miso",
            "run three times a week",
            "are learning the piano",
            "love cooking Indian food",
            "grew up on the west coast",
            "miss their best friend Maja",
            "call their brother in Berlin on Sundays",
            "read crime novels before bed",
        )
        * 3
    )
]
MESSAGES = (
    "Hi! Long day on the ward, my feet hurt and I barely had time to eat.",
    "The new colleague left early again and I did his charting. I'm annoyed.",
    "I think I'll talk to him tomorrow at lunch, calmly, about patient safety.",
    "Miso was waiting at the door when I came in, which helped a lot.",
)


@pytest.fixture
async def strict_api() -> AsyncIterator[FakeAnthropicAPI]:
    """The Messages API fake, caching only under the real rules."""
    async with FakeAnthropicAPI() as api:
        yield api


@pytest.fixture
async def cached_core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    tmp_path: Path,
    strict_api: FakeAnthropicAPI,
) -> AsyncIterator[Core]:
    """A core with the real Anthropic client on the strict fake, and a person it knows."""
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        anthropic_api_key="sk-ant-cache-test",  # type: ignore[arg-type]
        anthropic_base_url=strict_api.base_url,
        chat_model=CHAT_MODEL,
        burst_window_seconds=0,
    )
    core = await build_core(settings, clock=clock)
    person = await core.store.ensure_person(
        platform="console", platform_user_id="alice", chat_id="chat-alice", display_name="Alice"
    )
    for fact in FACTS:
        candidate = Candidate(fact, "fact", "core", 6, 0.9)
        await core.memories.add(person.id, candidate, source="extracted", actor="extraction")
    yield core
    await core.aclose()


async def converse(
    core: Core, api: FakeAnthropicAPI, clock: FakeClock, messages: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Send the messages 40 seconds apart; the chat calls' usage, one per turn."""
    for text in messages:
        clock.advance(seconds=40)
        api.cache.advance(40)
        await core.router.handle(says(text))
        await core.background.drain()
    return [usage for model, usage in api.usages if model == CHAT_MODEL]


async def test_from_the_second_turn_the_prompt_is_read_from_the_cache(
    cached_core: Core, strict_api: FakeAnthropicAPI, clock: FakeClock
) -> None:
    usages = await converse(cached_core, strict_api, clock, MESSAGES)

    assert len(usages) == len(MESSAGES)
    assert usages[0]["cache_read_input_tokens"] == 0
    assert usages[0]["cache_creation_input_tokens"] >= 1024  # tools, persona, memory
    for before, after in pairwise(usages):
        # What the turn before wrote is read back, and the history's breakpoint moves on.
        written = before["cache_read_input_tokens"] + before["cache_creation_input_tokens"]
        assert after["cache_read_input_tokens"] == written
        assert after["cache_creation_input_tokens"] > 0
    for usage in usages[1:]:
        everything = sum(usage[k] for k in ("input_tokens", "cache_creation_input_tokens"))
        assert usage["cache_read_input_tokens"] > 2 * everything


async def test_after_five_quiet_minutes_the_cache_is_written_again(
    cached_core: Core, strict_api: FakeAnthropicAPI, clock: FakeClock
) -> None:
    await converse(cached_core, strict_api, clock, MESSAGES[:2])
    strict_api.cache.advance(301)

    usages = await converse(cached_core, strict_api, clock, MESSAGES[2:3])

    assert usages[-1]["cache_read_input_tokens"] == 0
    assert usages[-1]["cache_creation_input_tokens"] > 1024


async def test_a_memory_noted_mid_conversation_reaches_the_model_without_a_cache_miss(
    cached_core: Core, strict_api: FakeAnthropicAPI, clock: FakeClock
) -> None:
    await converse(cached_core, strict_api, clock, MESSAGES[:2])
    person = await cached_core.store.ensure_person(
        platform="console", platform_user_id="alice", chat_id="chat-alice", display_name="Alice"
    )
    noted = Candidate("They do a colleague's charting when he leaves early", "fact", "core", 7, 0.9)
    await cached_core.memories.add(person.id, noted, source="extracted", actor="extraction")

    before, after = (await converse(cached_core, strict_api, clock, MESSAGES[2:3]))[-2:]

    written = before["cache_read_input_tokens"] + before["cache_creation_input_tokens"]
    assert after["cache_read_input_tokens"] == written
    system = " ".join(block["text"] for block in strict_api.last_request["system"])
    context = strict_api.last_request["messages"][-1]["content"][0]["text"]
    assert noted.content not in system
    assert "Noted during this conversation" in context and noted.content in context
