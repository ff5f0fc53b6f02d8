"""Memory scenarios with the scripted model served through the OpenAI-compatible fake:
the core talks to `OpenAILLM` over HTTP and the real `openai` SDK, and extraction works
in each structured-output mode (forced tool call, JSON schema, JSON in text)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.domain import IncomingMessage
from bot.openai_llm import OpenAILLM
from memory.store.tables import Memory
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.extractor import RuleExtractor
from tests.fakes.openai_api import FakeOpenAIAPI, ModelTraits
from tests.fakes.openai_bridge import bridge

CHAT = "llama3.1:8b"
FAST = {"tools": "qwen2.5:3b", "json_schema": "gemma2:2b", "json_text": "tinyllama"}
MODELS = {
    CHAT: ModelTraits(),
    FAST["tools"]: ModelTraits(),
    FAST["json_schema"]: ModelTraits(tools=False),
    FAST["json_text"]: ModelTraits(tools=False, response_format=False),
}
IDLE = timedelta(minutes=30)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAIAPI]:
    """An Ollama-like server with a capable chat model and three small fast models."""
    async with FakeOpenAIAPI(models=dict(MODELS)) as api:
        yield api


def says(text: str) -> IncomingMessage:
    return IncomingMessage("console", "alice", text, chat_id="chat-alice", display_name="Alice")


@pytest.mark.parametrize("mode", list(FAST))
async def test_a_fact_from_one_session_is_in_the_prompt_of_a_later_one(
    fake: FakeOpenAIAPI,
    scripted_llm: ScriptedLLM,
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    tmp_path: Path,
    mode: str,
) -> None:
    bridge(fake, scripted_llm, fast_model=FAST[mode])
    llm = OpenAILLM(base_url=fake.base_url, api_key=None, chat_model=CHAT, fast_model=FAST[mode])
    settings = Settings(database_url=database_url, data_dir=tmp_path, burst_window_seconds=0.05)
    core: Core = await build_core(settings, llm=llm, clock=clock)
    extractor = RuleExtractor()
    extractor.add("nurse", content="The person works as a nurse at Rigshospitalet")
    scripted_llm.tools["record_memories"] = extractor
    try:
        await core.router.handle(says("I work as a nurse at Rigshospitalet, long shifts lately"))
        await core.background.drain()
        clock.advance(hours=2)
        await core.memory.sweep(idle_gap=IDLE)
        await core.background.drain()
        reply = await core.router.handle(says("Hi again!"))
    finally:
        await core.aclose()

    assert reply.text == "Tell me more."
    async with db() as s:
        stored = list((await s.scalars(select(Memory.content))).all())
    assert stored == ["The person works as a nurse at Rigshospitalet"]
    last_chat = [body for body in fake.requests if body["model"] == CHAT][-1]
    prompt = "\n".join(str(m.get("content") or "") for m in last_chat["messages"])
    assert "works as a nurse at Rigshospitalet" in prompt
    assert llm.structured_mode(FAST[mode]) == mode
