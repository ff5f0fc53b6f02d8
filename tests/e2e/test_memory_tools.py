"""The chat model's memory tools end to end: the real anthropic SDK against the loopback
Messages API (which checks tool schemas and tool_use/tool_result pairing as the API
does), in process through the whole core and in the real `companion chat` terminal; and
the real openai SDK against the OpenAI-compatible fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.anthropic_llm import AnthropicLLM
from bot.bootstrap import Core, build_core, build_llm
from bot.config import Settings
from bot.errors import LLMUnavailable
from bot.llm import LLMRequest, ToolSpec, Turn
from bot.memory_tools import MEMORY_TOOLS
from memory.store.items import Candidate
from memory.store.tables import Memory
from tests.conftest import FakeClock
from tests.e2e.test_console import KEY, _companion, _env
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.openai_api import FakeOpenAIAPI, ModelTraits
from tests.support.commands import labels, press, says


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropicAPI]:
    async with FakeAnthropicAPI(api_key=KEY) as api:
        yield api


@pytest.fixture
async def anthropic_core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    fake: FakeAnthropicAPI,
    clock: FakeClock,
    tmp_path: Path,
) -> AsyncIterator[Core]:
    llm = AnthropicLLM(
        api_key=KEY,
        chat_model="claude-chat-test",
        fast_model="claude-fast-test",
        base_url=fake.base_url,
        timeout_seconds=2,
        max_retries=0,
    )
    settings = Settings(database_url=database_url, data_dir=tmp_path, burst_window_seconds=0.05)
    core = await build_core(settings, llm=llm, clock=clock)
    yield core
    await core.aclose()
    await llm.aclose()


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


async def test_update_then_search_round_trip_through_the_sdk(
    anthropic_core: Core, fake: FakeAnthropicAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    core = anthropic_core
    person = await core.store.ensure_person(
        platform="console", platform_user_id="alice", chat_id="chat-alice", display_name="A"
    )
    await core.memories.add(
        person.id,
        Candidate("They work at Acme", "fact", "core", importance=6, confidence=0.9),
        source="extracted",
        actor="extraction",
    )
    fake.queue_tool_use("update_memory", {"memory": "m1", "text": "They work at Globex"})
    fake.queue_text("Congrats on Globex!")
    reply = await core.router.handle(says("I left Acme, I work at Globex now"))
    await core.background.drain()
    chats = [r for r in fake.requests if r.get("tools")]
    assert [t["name"] for t in chats[0]["tools"]] == [
        "remember",
        "confirm_memory",
        "update_memory",
        "forget_memory",
        "search_memory",
    ]
    (result,) = _tool_results(chats[-1])
    assert result["content"].startswith("Updated: m1 is now m2")
    assert reply.text.startswith("Congrats on Globex!\n\nMemory changes I made just now:")
    assert labels(reply) == ["↩ Undo m2"]
    async with db() as s:
        current = await s.scalar(select(Memory.content).where(Memory.valid_until.is_(None)))
    assert current == "They work at Globex"

    fake.queue_tool_use("search_memory", {"query": "where do I work"})
    fake.queue_text("At Globex.")
    await core.router.handle(says("where do I work again?"))
    (found,) = _tool_results(fake.requests[-1])
    assert 'id="m2"' in found["content"] and "Globex" in found["content"]
    assert "Acme" not in found["content"]

    undone = await press(core, reply, "↩ Undo")
    assert "They work at Acme" in undone.text


async def test_the_fake_refuses_a_tool_schema_the_api_would(fake: FakeAnthropicAPI) -> None:
    llm = AnthropicLLM(
        api_key=KEY,
        chat_model="claude-chat-test",
        fast_model="claude-fast-test",
        base_url=fake.base_url,
        max_retries=0,
    )
    broken = ToolSpec("broken", "x", {"type": "object", "properties": {"n": {"type": "strang"}}})
    request = LLMRequest(role="chat", stable_system="Hi.", turns=(Turn("user", "hello"),))
    try:
        with pytest.raises(LLMUnavailable, match="JSON schema is invalid"):
            await llm.complete(replace(request, tools=(broken,)))
        with pytest.raises(LLMUnavailable, match="Tool names must be unique"):
            twice = (*MEMORY_TOOLS, MEMORY_TOOLS[0])
            await llm.complete(replace(request, tools=twice))
        fake.queue_text("fine")
        completion = await llm.complete(replace(request, tools=MEMORY_TOOLS))
        assert completion.text == "fine"
    finally:
        await llm.aclose()


async def test_forget_and_undo_in_the_terminal(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(api_key=KEY) as fake:
        fake.queue_tool_use("classify_memory", {"category": "preference", "importance": 6})
        fake.queue_tool_use("forget_memory", {"memory": "green tea"})  # protected: refused
        fake.queue_text("Shall I forget it?")
        fake.queue_tool_use("forget_memory", {"memory": "m1"})
        fake.queue_text("Done, it's forgotten.")
        lines = [
            "/remember I like green tea",
            "I'm off green tea",
            "yes, forget m1",
            "1",  # ↩ Undo m1, the first button under the reply
            "/memory",
        ]
        code, out, err = await _companion(
            "chat",
            stdin="\n".join(lines) + "\n",
            env=_env(fake, database_url, tmp_path),
            cwd=tmp_path,
        )
        results = [b["content"] for r in fake.requests for b in _tool_results(r)]
    assert code == 0, err
    assert results[0].startswith("Nothing was changed: m1 is something the person told you")
    assert results[-1].startswith("Forgotten: m1")
    assert "companion> Done, it's forgotten.\n\nMemory changes I made just now:" in out
    assert "• Forgot: “I like green tea” (m1; in /memory trash for 30 days)" in out
    assert "  [1] ↩ Undo m1" in out
    assert "Undone — “" in out and "is back as it was" in out
    async with db() as s:
        (status,) = (await s.execute(select(Memory.status))).one()
    assert status == "active"


async def test_the_openai_provider_carries_the_tools_and_the_round_trip(
    database_url: str, db: async_sessionmaker[AsyncSession], clock: FakeClock, tmp_path: Path
) -> None:
    chat = "llama3.1:8b"
    async with FakeOpenAIAPI(models={chat: ModelTraits()}) as api:
        settings = Settings(
            database_url=database_url,
            data_dir=tmp_path,
            llm_provider="openai",
            openai_base_url=api.base_url,
            chat_model=chat,
            fast_model=chat,
        )
        core = await build_core(settings, llm=build_llm(settings), clock=clock)
        try:
            person = await core.store.ensure_person(
                platform="console", platform_user_id="alice", chat_id="chat-alice", display_name="A"
            )
            await core.memories.add(
                person.id,
                Candidate("They are learning Danish", "goal", "active", 5, 0.8),
                source="extracted",
                actor="extraction",
            )
            api.queue_tool_call("forget_memory", {"memory": "Danish"})
            api.queue_text("Okay, I've let that go.")
            reply = await core.router.handle(says("please forget the Danish thing"))
            await core.background.drain()
        finally:
            await core.aclose()
    chats = [body for body in api.requests if body.get("tools")]
    names = [tool["function"]["name"] for tool in chats[0]["tools"]]
    assert names == [
        "remember",
        "confirm_memory",
        "update_memory",
        "forget_memory",
        "search_memory",
    ]
    tool_messages = [m for m in chats[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"][:12] for m in tool_messages] == ["Forgotten: m"]
    assert reply.text.startswith("Okay, I've let that go.\n\nMemory changes I made just now:")
    assert labels(reply) == ["↩ Undo m1"]
    async with db() as s:
        assert (await s.scalar(select(Memory.status))) == "forgotten"


async def test_the_openai_fake_refuses_a_tool_schema_the_api_would() -> None:
    chat = "llama3.1:8b"

    def body(tools: list[dict[str, Any]]) -> dict[str, Any]:
        messages = [{"role": "user", "content": "hello"}]
        return {"model": chat, "messages": messages, "tools": tools}

    def function(spec: ToolSpec) -> dict[str, Any]:
        described = {"name": spec.name, "description": spec.description}
        return {"type": "function", "function": {**described, "parameters": spec.input_schema}}

    broken = ToolSpec("broken", "x", {"type": "object", "required": "n"})
    async with FakeOpenAIAPI(models={chat: ModelTraits()}) as api, aiohttp.ClientSession() as http:
        url = f"{api.base_url}/chat/completions"
        async with http.post(url, json=body([function(broken)])) as response:
            assert response.status == 400
            error = (await response.json())["error"]["message"]
        assert error.startswith("Invalid schema for function 'broken': JSON schema is invalid")
        async with http.post(url, json=body([function(t) for t in MEMORY_TOOLS])) as response:
            assert response.status == 200
