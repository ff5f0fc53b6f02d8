"""A whole core (router, storage, background work) on the test database, with a
scripted model, for driving adapters end to end."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import Core, build_core
from bot.config import Settings
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM


@pytest.fixture
def scripted_llm() -> ScriptedLLM:
    """The model the core talks to."""
    return ScriptedLLM()


@pytest.fixture
async def core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
    tmp_path: object,
) -> AsyncIterator[Core]:
    """A core over empty tables; closed (background work drained) after the test."""
    settings = Settings(database_url=database_url, data_dir=tmp_path, burst_window_seconds=0.05)
    built = await build_core(settings, llm=scripted_llm)
    yield built
    await built.aclose()


@pytest.fixture
def core_clock() -> FakeClock:
    """A clock for tests that build their own core with `build_core(..., clock=...)`."""
    return FakeClock()
