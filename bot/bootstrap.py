"""Wiring of the core: database, language model, memory and conversation, built once.

Adapters and the scheduler receive a `Core` and use only what it exposes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bot.background import BackgroundTasks
from bot.commands.router import Router
from bot.config import Settings
from bot.conversation import Conversation, ConversationConfig
from bot.errors import ConfigurationError
from bot.llm import LLM
from bot.prompting import load_persona
from memory.conversations import SqlConversationStore
from memory.database import (
    EmbeddedPostgres,
    create_engine,
    migrate,
    session_factory,
    start_embedded,
    wait_until_reachable,
)
from memory.ports import Clock, SystemClock

log = structlog.get_logger(__name__)


@dataclass
class Core:
    """Everything the adapters and the scheduler need, built by `build_core`."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    store: SqlConversationStore
    llm: LLM
    clock: Clock
    background: BackgroundTasks
    router: Router
    embedded: EmbeddedPostgres | None = None
    closers: list[Any] = field(default_factory=list)

    async def aclose(self) -> None:
        """Finish background work, close clients and the database."""
        await self.background.drain()
        for closer in reversed(self.closers):
            await closer()
        await self.engine.dispose()
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)


async def open_database(settings: Settings) -> tuple[AsyncEngine, EmbeddedPostgres | None]:
    """Connect to `DATABASE_URL`, or start the embedded server; then migrate."""
    embedded = None
    if settings.database_url is not None:
        url = settings.database_url.get_secret_value()
    else:
        embedded = await asyncio.to_thread(start_embedded, settings.data_dir / "pgdata")
        url = embedded.url
    try:
        engine = create_engine(url)
    except ValueError as exc:
        raise ConfigurationError(f"DATABASE_URL: {exc}") from exc
    await wait_until_reachable(engine)
    await migrate(engine, embedding_dim=settings.embedding_dim)
    return engine, embedded


def build_llm(settings: Settings) -> LLM:
    """The Anthropic client from the settings; `ConfigurationError` without a key."""
    from bot.anthropic_llm import AnthropicLLM

    if not settings.has_llm or settings.anthropic_api_key is None:
        raise ConfigurationError(
            "ANTHROPIC_API_KEY is not set. Put your Anthropic API key in the environment "
            "or in .env (see .env.example), e.g. ANTHROPIC_API_KEY=sk-ant-..."
        )
    return AnthropicLLM(
        api_key=settings.anthropic_api_key.get_secret_value(),
        chat_model=settings.chat_model,
        fast_model=settings.fast_model,
        base_url=settings.anthropic_base_url,
        timeout_seconds=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
    )


def conversation_config(settings: Settings) -> ConversationConfig:
    """The turn settings."""
    from datetime import timedelta

    return ConversationConfig(
        idle_gap=timedelta(minutes=settings.session_idle_minutes),
        context_tokens=settings.context_tokens,
        reply_max_tokens=settings.reply_max_tokens,
        max_message_chars=settings.max_message_chars,
    )


async def build_core(
    settings: Settings, *, llm: LLM | None = None, clock: Clock | None = None
) -> Core:
    """Build the core. The language model is required (pass one in tests)."""
    model = llm if llm is not None else build_llm(settings)
    engine, embedded = await open_database(settings)
    sessions = session_factory(engine)
    clock = clock or SystemClock()
    store = SqlConversationStore(sessions)
    background = BackgroundTasks()
    conversation = Conversation(
        store=store,
        llm=model,
        clock=clock,
        persona=load_persona(settings.persona_file),
        config=conversation_config(settings),
        background=background,
    )
    core = Core(
        settings=settings,
        engine=engine,
        sessions=sessions,
        store=store,
        llm=model,
        clock=clock,
        background=background,
        router=Router(conversation),
        embedded=embedded,
    )
    closer = getattr(model, "aclose", None)
    if closer is not None:
        core.closers.append(closer)
    log.info("core.ready", embedded_database=embedded is not None)
    return core
