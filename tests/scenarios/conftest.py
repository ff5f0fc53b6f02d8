"""The scenario world: a whole core on real PostgreSQL (empty tables), the scenario
model served over loopback HTTP through each provider in turn (the `anthropic` SDK and
the fake Messages API, the `openai` SDK and the fake OpenAI-compatible server, chosen by
`COMPANION_LLM_PROVIDER` as in production), a clock starting on Monday 19 October 2026,
the scheduler's jobs with their production settings (model steps on), recording
delivery ports on every platform, and three people in three timezones.

Europe leaves summer time on Sunday 25 October 2026 and the United States on Sunday
1 November 2026, so two weeks from the start cross both changes; Tokyo has none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import build_core
from bot.config import Settings
from scheduler.deps import config_from, deps_from
from tests.conftest import FakeClock
from tests.fakes import anthropic_bridge, openai_bridge
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.openai_api import FakeOpenAIAPI
from tests.scenarios.harness import Person, World
from tests.scenarios.model import ScenarioModel

START = datetime(2026, 10, 19, 7, 0, tzinfo=UTC)  # Monday: 00:00 in LA, 08:00 in Lisbon
PROVIDERS = ("anthropic", "openai")
MODELS = {
    "anthropic": ("claude-sonnet-4-5-test", "claude-haiku-4-5"),  # test: no SDK warning
    "openai": ("llama3.1:8b", "qwen2.5:3b"),
}


async def serve(provider: str, model: ScenarioModel, stack: AsyncExitStack) -> dict[str, Any]:
    """Serve `model` through the provider's loopback fake; the settings that select it."""
    chat, fast = MODELS[provider]
    if provider == "anthropic":
        anthropic = await stack.enter_async_context(FakeAnthropicAPI())
        anthropic_bridge.bridge(anthropic, model, fast_model=fast)
        return {
            "llm_provider": "anthropic",
            "anthropic_api_key": "sk-ant-scenarios",
            "anthropic_base_url": anthropic.base_url,
            "chat_model": chat,
            "fast_model": fast,
        }
    openai = await stack.enter_async_context(FakeOpenAIAPI())
    openai_bridge.bridge(openai, model, fast_model=fast)
    return {
        "llm_provider": "openai",
        "openai_base_url": openai.base_url,
        "chat_model": chat,
        "fast_model": fast,
    }


@pytest.fixture(params=PROVIDERS)
async def world(
    request: pytest.FixtureRequest,
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    tmp_path: Path,
) -> AsyncIterator[World]:
    """The world at the start of the fortnight, nobody has written yet, the model
    behind each provider in turn."""
    clock = FakeClock(START)
    model = ScenarioModel(clock)
    stack = AsyncExitStack()
    selected = await serve(request.param, model, stack)
    settings = Settings(
        database_url=database_url, data_dir=tmp_path, burst_window_seconds=0.05, **selected
    )
    core = await build_core(settings, clock=clock)
    # Exact check-in times (no per-person spread): the scenarios read "at nine".
    deps = deps_from(core, config_from(core, llm_steps=True, spread=timedelta(0)))
    built = World(core=core, clock=clock, model=model, deps=deps)
    built.register_platforms(("telegram", "discord", "console"))
    built.person("maya", "telegram", "America/Los_Angeles", "Maya")
    built.person("tomas", "discord", "Europe/Lisbon", "Tomás")
    built.person("aiko", "console", "Asia/Tokyo", "Aiko")
    yield built
    await core.aclose()
    await stack.aclose()
    # A forced tool the scenario model cannot answer degrades the feature silently (it
    # fails like an outage): say so, so the scenario model learns to answer it.
    assert not model.unscripted, (
        f"the model was asked for {sorted(set(model.unscripted))} and has no scripted "
        "answer: add one to ScenarioModel's defaults in tests/scenarios/model.py"
    )


@pytest.fixture
def maya(world: World) -> Person:
    """A nurse in Los Angeles, on Telegram (US summer time ends on 1 November)."""
    return world.people["maya"]


@pytest.fixture
def tomas(world: World) -> Person:
    """A student in Lisbon, on Discord (EU summer time ends on 25 October)."""
    return world.people["tomas"]


@pytest.fixture
def aiko(world: World) -> Person:
    """An engineer in Tokyo, in the terminal (no summer time)."""
    return world.people["aiko"]
