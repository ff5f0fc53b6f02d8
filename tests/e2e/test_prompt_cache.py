"""The prompt cache under the real API's rules: the loopback fake through the real
`anthropic` SDK, and the requests `AnthropicLLM` builds so that the cache pays."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

import anthropic
import pytest

from bot.anthropic_llm import AnthropicLLM
from bot.llm import LLMRequest, ToolSpec, Turn
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.prompt_cache import LOOKBACK_BLOCKS, block_tokens

API_KEY = "sk-ant-cache-test"
SONNET = "claude-sonnet-4-5-test"
"""A Sonnet 4.5 name (1,024-token minimum) that the SDK does not warn is deprecated."""
HAIKU = "claude-haiku-4-5"
LONG = "The companion listens closely and answers warmly, in a few sentences. " * 70
"""About 1,230 tokens: past Sonnet's 1,024-token minimum, below Haiku's 4,096."""
SHORT = "You are Mira, a warm companion."
CACHED = {"type": "ephemeral"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    """The strict fake Messages API."""
    async with FakeAnthropicAPI(api_key=API_KEY) as api:
        yield api


@pytest.fixture
async def client(fake: FakeAnthropicAPI) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """The real SDK pointed at the fake, without retries."""
    sdk = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=fake.base_url, max_retries=0)
    yield sdk
    await sdk.close()


def system(*texts: str, marked: tuple[int, ...] = (0,), ttl: str | None = None) -> Any:
    """System blocks, those at `marked` with cache_control."""
    control: dict[str, str] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return [
        {"type": "text", "text": text, **({"cache_control": control} if i in marked else {})}
        for i, text in enumerate(texts)
    ]


async def usage(
    client: anthropic.AsyncAnthropic, blocks: Any, model: str = SONNET, question: str = "Hi"
) -> anthropic.types.Usage:
    message = await client.messages.create(
        model=model,
        max_tokens=100,
        system=blocks,
        messages=[{"role": "user", "content": question}],
    )
    return message.usage


def total(u: anthropic.types.Usage) -> int:
    return u.input_tokens + (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0)


# The fake's rules, through the SDK


async def test_a_fifth_breakpoint_is_refused_like_the_api_does(
    client: anthropic.AsyncAnthropic,
) -> None:
    blocks = system(*(f"Part {i}." for i in range(5)), marked=(0, 1, 2, 3, 4))

    with pytest.raises(anthropic.BadRequestError) as raised:
        await usage(client, blocks)

    assert raised.value.status_code == 400
    assert raised.value.body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        },
        "request_id": raised.value.request_id,
    }
    assert await usage(client, system(*(f"Part {i}." for i in range(4)), marked=(0, 1, 2, 3)))


async def test_a_prefix_below_the_minimum_is_neither_written_nor_read(
    client: anthropic.AsyncAnthropic,
) -> None:
    first = await usage(client, system(SHORT))
    second = await usage(client, system(SHORT))

    for u in (first, second):
        assert (u.cache_creation_input_tokens, u.cache_read_input_tokens) == (0, 0)
        assert u.input_tokens == total(first) > 0


async def test_the_minimum_depends_on_the_model(client: anthropic.AsyncAnthropic) -> None:
    on_sonnet = await usage(client, system(LONG), model=SONNET)
    on_haiku = await usage(client, system(LONG), model=HAIKU)
    longer = await usage(client, system(LONG * 4), model=HAIKU)

    assert on_sonnet.cache_creation_input_tokens == block_tokens({"type": "text", "text": LONG})
    assert on_haiku.cache_creation_input_tokens == 0
    assert longer.cache_creation_input_tokens and longer.cache_creation_input_tokens >= 4096


async def test_an_identical_prefix_is_read_and_input_excludes_it(
    client: anthropic.AsyncAnthropic,
) -> None:
    first = await usage(client, system(LONG, "It is Monday."), question="Hello")
    second = await usage(client, system(LONG, "It is Tuesday, and raining."), question="Hi")

    assert first.cache_read_input_tokens == 0
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens > 1024
    assert second.cache_creation_input_tokens == 0
    assert second.input_tokens == total(second) - second.cache_read_input_tokens
    assert second.input_tokens < 30


async def test_a_changed_prefix_misses(client: anthropic.AsyncAnthropic) -> None:
    await usage(client, system("Tools and rules, version 1.", LONG, marked=(1,)))
    changed = await usage(client, system("Tools and rules, version 2.", LONG, marked=(1,)))

    assert changed.cache_read_input_tokens == 0
    assert changed.cache_creation_input_tokens == total(changed) - changed.input_tokens > 1024


async def test_entries_expire_after_five_minutes_unless_read(
    client: anthropic.AsyncAnthropic, fake: FakeAnthropicAPI
) -> None:
    await usage(client, system(LONG))
    fake.cache.advance(299)
    kept = await usage(client, system(LONG))  # a hit refreshes the entry
    fake.cache.advance(299)
    still = await usage(client, system(LONG))
    fake.cache.advance(301)
    expired = await usage(client, system(LONG))

    assert kept.cache_read_input_tokens and still.cache_read_input_tokens
    assert expired.cache_read_input_tokens == 0
    assert expired.cache_creation_input_tokens == kept.cache_read_input_tokens


async def test_a_one_hour_entry_outlives_five_minutes(
    client: anthropic.AsyncAnthropic, fake: FakeAnthropicAPI
) -> None:
    written = await usage(client, system(LONG, ttl="1h"))
    fake.cache.advance(1800)
    read = await usage(client, system(LONG, ttl="1h"))
    fake.cache.advance(3601)
    expired = await usage(client, system(LONG, ttl="1h"))

    assert written.cache_creation is not None
    assert written.cache_creation.ephemeral_1h_input_tokens == written.cache_creation_input_tokens
    assert read.cache_read_input_tokens == written.cache_creation_input_tokens
    assert expired.cache_read_input_tokens == 0


async def test_a_one_hour_breakpoint_after_a_five_minute_one_is_refused(
    client: anthropic.AsyncAnthropic,
) -> None:
    blocks = system(LONG, "More rules.", marked=(0, 1))
    blocks[1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}

    with pytest.raises(anthropic.BadRequestError, match="ttl='1h'"):
        await usage(client, blocks)


async def test_a_hit_is_found_up_to_twenty_blocks_before_the_breakpoint(
    client: anthropic.AsyncAnthropic,
) -> None:
    await usage(client, system(LONG))  # writes the entry for [LONG]

    def grown(word: str, extra: int) -> Any:
        """LONG, then `extra` new blocks, the only breakpoint on the last."""
        return system(LONG, *(f"{word} {i}." for i in range(extra)), marked=(extra,))

    near = await usage(client, grown("Note", LOOKBACK_BLOCKS))
    far = await usage(client, grown("Other", LOOKBACK_BLOCKS + 1))

    assert near.cache_read_input_tokens == block_tokens({"type": "text", "text": LONG})
    assert near.cache_creation_input_tokens == LOOKBACK_BLOCKS * 2  # the notes, written
    assert far.cache_read_input_tokens == 0
    assert far.cache_creation_input_tokens == total(far) - far.input_tokens


async def test_a_different_tool_choice_misses_the_messages_but_not_the_system(
    client: anthropic.AsyncAnthropic,
) -> None:
    tool: Any = {"name": "note", "description": "Take a note.", "input_schema": {"type": "object"}}
    question: Any = [
        {"role": "user", "content": [{"type": "text", "text": LONG, "cache_control": CACHED}]}
    ]
    ask: Any = {"model": SONNET, "max_tokens": 10, "system": system(LONG), "tools": [tool]}
    await client.messages.create(**ask, messages=question)
    again = await client.messages.create(**ask, messages=question)
    forced = await client.messages.create(
        **ask, messages=question, tool_choice={"type": "tool", "name": "note"}
    )

    long_tokens = block_tokens({"type": "text", "text": LONG})
    assert again.usage.cache_read_input_tokens == block_tokens(tool) + 2 * long_tokens
    assert forced.usage.cache_read_input_tokens == block_tokens(tool) + long_tokens
    assert forced.usage.cache_creation_input_tokens == long_tokens


# What AnthropicLLM sends


@pytest.fixture
async def llm(fake: FakeAnthropicAPI) -> AsyncIterator[AnthropicLLM]:
    client = AnthropicLLM(
        api_key=API_KEY, chat_model=SONNET, fast_model=HAIKU, base_url=fake.base_url
    )
    yield client
    await client.aclose()


REMEMBER = ToolSpec("remember", "Save a fact.", {"type": "object", "properties": {}})


def chat(turns: tuple[Turn, ...], context: str) -> LLMRequest:
    return LLMRequest(
        role="chat",
        stable_system=SHORT,
        standing_system=LONG,
        dynamic_system="The person's display name: Sofie",
        turns=turns,
        turn_context=context,
        tools=(REMEMBER,),
    )


def breakpoints(body: dict[str, Any]) -> list[str]:
    found = [f"tool:{t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    found += [f"system:{i}" for i, b in enumerate(body["system"]) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        if isinstance(message["content"], list):
            found += [f"message:{i}" for b in message["content"] if "cache_control" in b]
    return found


async def test_the_request_is_ordered_for_the_cache(
    llm: AnthropicLLM, fake: FakeAnthropicAPI
) -> None:
    turns = (Turn("user", "Hi"), Turn("assistant", "Hello!"), Turn("user", "How are you?"))
    await llm.complete(chat(turns, "<turn_context>Now: Monday 18:30</turn_context>"))

    body = fake.last_request
    assert breakpoints(body) == ["system:0", "system:1", "message:1"]
    assert [b["text"] for b in body["system"]] == [SHORT, LONG, "The person's display name: Sofie"]
    assert body["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "<turn_context>Now: Monday 18:30</turn_context>"},
            {"type": "text", "text": "How are you?"},
        ],
    }


async def test_a_growing_conversation_reads_what_the_turn_before_wrote(
    llm: AnthropicLLM,
) -> None:
    turns: tuple[Turn, ...] = (Turn("user", "Hi"),)
    usages = []
    for n in range(4):
        completion = await llm.complete(chat(turns, f"<turn_context>Turn {n}</turn_context>"))
        usages.append(completion.usage)
        turns = (*turns, Turn("assistant", f"Reply {n}, " * 20), Turn("user", f"Message {n}"))

    assert usages[0].cache_write_tokens > 1024 and usages[0].cache_read_tokens == 0
    for before, after in pairwise(usages):
        assert after.cache_read_tokens == before.cache_read_tokens + before.cache_write_tokens
    assert all(u.input_tokens < 40 for u in usages[1:])
