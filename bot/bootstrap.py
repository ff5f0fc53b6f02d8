"""Wiring of the core: database, language model, memory and conversation, built once.

Adapters and the scheduler receive a `Core` and use only what it exposes.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import Any

import structlog

from bot.background import BackgroundTasks
from bot.commands.base import CommandDeps
from bot.commands.edit import EditIntake
from bot.commands.notices import tool_notice
from bot.commands.questions import update_question
from bot.commands.router import Router
from bot.commands.setup import install_commands
from bot.commands.unsure import unsure_question
from bot.config import Settings
from bot.conversation import Conversation, ConversationConfig
from bot.errors import ConfigurationError
from bot.health import Health
from bot.import_progress import ImportRunner
from bot.imports import Extracting, ImportConfig
from bot.llm import LLM
from bot.llm_tools import LLMToolCaller
from bot.memory_gateway import MemoryServices, MemorySettings
from bot.notice_window import NoticeWindow
from bot.outbound import Outbound
from bot.panel.links import panel_links
from bot.prompting import load_persona
from bot.timezone_onboarding import TimezoneOnboarding
from bot.turns import SharedTurnLocks
from memory.care.repository import SqlMemoryRepository
from memory.recall.embedder_identity import check_embedder
from memory.recall.embeddings import RecentEmbeddings, build_embedder
from memory.store.actions import SqlActionStore
from memory.store.conversations import SqlConversationStore
from memory.store.coordination import SqlCoordination
from memory.store.database import (
    Database,
    EmbeddedPostgres,
    Engine,
    autocommit_session_factory,
    create_engine,
    migrate,
    session_factory,
    start_embedded,
    wait_until_reachable,
)
from memory.store.errors import EmbedderMismatch
from memory.store.ports import Clock, Embedder, SystemClock

log = structlog.get_logger(__name__)


@dataclass
class Core:
    """Everything the adapters and the scheduler need, built by `build_core`."""

    settings: Settings
    engine: Engine
    sessions: Database
    store: SqlConversationStore
    llm: LLM
    clock: Clock
    background: BackgroundTasks
    router: Router
    memories: SqlMemoryRepository
    memory: MemoryServices
    outbound: Outbound
    onboarding: TimezoneOnboarding | None = None
    importer: ImportRunner | None = None
    embedded: EmbeddedPostgres | None = None
    closers: list[Any] = field(default_factory=list)
    health: Health = field(default_factory=Health)
    coordination: SqlCoordination | None = None
    """Per-person coordination across processes (bursts, rate limits; turns already)."""
    commands: CommandDeps | None = None
    """What the commands use; the memory panel calls the same use cases with it."""
    autocommit: Database | None = None
    """Sessions whose every statement commits on its own: for lone reads and one-statement
    writes (no BEGIN and COMMIT or ROLLBACK round trips); `sessions` when not set."""

    async def aclose(self) -> None:
        """Finish background work, close clients and the database."""
        await self.background.drain()
        for closer in reversed(self.closers):
            await closer()
        await self.engine.dispose()
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)


async def open_database(settings: Settings) -> tuple[Engine, EmbeddedPostgres | None]:
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
    """The model client of `COMPANION_LLM_PROVIDER`; `ConfigurationError` naming what is
    missing (the Anthropic key; for an OpenAI-compatible server the chat model, or a key
    when the server is not local)."""
    if settings.llm_provider == "openai":
        return _openai_llm(settings)
    from bot.anthropic_llm import AnthropicLLM

    if not settings.has_llm or settings.anthropic_api_key is None:
        raise ConfigurationError(
            "ANTHROPIC_API_KEY is not set. Put your Anthropic API key in the environment "
            "or in .env (see .env.example), e.g. ANTHROPIC_API_KEY=sk-ant-... "
            "(or set COMPANION_LLM_PROVIDER=openai for a local or OpenAI-compatible model)"
        )
    return AnthropicLLM(
        api_key=settings.anthropic_api_key.get_secret_value(),
        chat_model=settings.chat_model,
        fast_model=settings.fast_model,
        base_url=settings.anthropic_base_url,
        timeout_seconds=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
    )


def _openai_llm(settings: Settings) -> LLM:
    from bot.openai_llm import OpenAILLM

    problem = settings.openai_problem()
    if problem is not None:
        raise ConfigurationError(problem)
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return OpenAILLM(
        base_url=settings.openai_base_url,
        api_key=key or None,
        chat_model=settings.chat_model,
        fast_model=settings.openai_fast_model,
        timeout_seconds=settings.llm_timeout_seconds,
        max_retries=settings.llm_max_retries,
    )


def import_config(settings: Settings) -> ImportConfig:
    """The import settings."""
    return ImportConfig(
        max_bytes=settings.import_max_bytes,
        input_price_per_mtok=settings.import_input_price_per_mtok,
        output_price_per_mtok=settings.import_output_price_per_mtok,
    )


def conversation_config(settings: Settings) -> ConversationConfig:
    """The turn settings."""
    from datetime import timedelta

    return ConversationConfig(
        idle_gap=timedelta(minutes=settings.session_idle_minutes),
        recent_past=timedelta(hours=settings.recent_past_hours),
        context_tokens=settings.context_tokens,
        reply_max_tokens=settings.reply_max_tokens,
        max_message_chars=settings.max_message_chars,
    )


async def verify_embedder(sessions: Database, embedder: Embedder) -> None:
    """Refuse to start with another embedder than the stored vectors were made with (an
    empty database records this one)."""
    try:
        await check_embedder(sessions, embedder)
    except EmbedderMismatch as exc:
        raise ConfigurationError(
            "COMPANION_EMBEDDING_PROVIDER / COMPANION_EMBEDDING_DIM: the stored vectors were "
            f"made by {exc.recorded.name} ({exc.recorded.dim} dimensions), but the settings "
            f"configure {exc.configured.name} ({exc.configured.dim} dimensions). Set them "
            "back, or stop the companion and run `companion memory reembed` to embed "
            "everything again with the new embedder."
        ) from exc


def build_embedder_from(settings: Settings) -> Embedder:
    """The configured embedder, keeping recent vectors (a turn embeds the person's message
    twice: to store it and to recall with it); `ConfigurationError` naming the setting
    when it can't be built."""
    key = settings.voyage_api_key.get_secret_value() if settings.voyage_api_key else None
    openai_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    try:
        return RecentEmbeddings(
            build_embedder(
                settings.embedding_provider,
                settings.embedding_dim,
                key,
                settings.voyage_model,
                openai_model=settings.openai_embedding_model,
                openai_base_url=settings.openai_base_url,
                openai_api_key=openai_key or None,
            )
        )
    except ValueError as exc:
        raise ConfigurationError(f"COMPANION_EMBEDDING_PROVIDER / _DIM: {exc}") from exc


async def build_core(
    settings: Settings,
    *,
    llm: LLM | None = None,
    clock: Clock | None = None,
    embedder: Embedder | None = None,
) -> Core:
    """Build the core. The language model is required (pass one in tests)."""
    model = llm if llm is not None else build_llm(settings)
    embedder = embedder or build_embedder_from(settings)
    engine, embedded = await open_database(settings)
    sessions = session_factory(engine)
    autocommit = autocommit_session_factory(engine)
    try:
        await verify_embedder(sessions, embedder)
    except ConfigurationError:
        await engine.dispose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
        raise
    clock = clock or SystemClock()
    coordination = SqlCoordination(autocommit, engine)
    store = SqlConversationStore(sessions, embedder, autocommit=autocommit)
    memories = SqlMemoryRepository(sessions, embedder, clock)
    tool_caller = LLMToolCaller(model)
    background = BackgroundTasks()
    outbound = Outbound(autocommit)
    commands = CommandDeps(
        sessions=sessions,
        store=store,
        memories=memories,
        actions=SqlActionStore(sessions),
        clock=clock,
        tool_caller=tool_caller,
        pin_limit=settings.pin_limit,
        imports=import_config(settings),
        panel=panel_links(settings, sessions, clock),
    )
    memory = MemoryServices(
        sessions=sessions,
        store=store,
        memories=memories,
        embedder=embedder,
        tool_caller=tool_caller,
        writer=tool_caller,
        clock=clock,
        background=background,
        notices=NoticeWindow(sessions=sessions, commands=commands, outbound=outbound, clock=clock),
        ask_update=functools.partial(update_question, commands),
        tool_notice=functools.partial(tool_notice, commands),
        settings=MemorySettings(
            budget_tokens=settings.memory_budget_tokens,
            extract_every_n=settings.extract_every_n_messages,
            confidence_floor=settings.memory_confidence_floor,
            recall_deadline=settings.recall_deadline_ms / 1000,
        ),
        autocommit=autocommit,
        ask_unsure=functools.partial(unsure_question, commands),
    )
    onboarding = TimezoneOnboarding(commands)
    conversation = Conversation(
        store=store,
        llm=model,
        clock=clock,
        persona=load_persona(settings.persona_file),
        config=conversation_config(settings),
        background=background,
        memory=memory,
        extras=onboarding,
        edits=EditIntake(commands),
        turns=SharedTurnLocks(coordination, lease=settings.turn_lease_seconds),
    )
    router = Router(conversation)
    install_commands(router, commands)
    core = Core(
        settings=settings,
        engine=engine,
        sessions=sessions,
        store=store,
        llm=model,
        clock=clock,
        background=background,
        router=router,
        memories=memories,
        memory=memory,
        outbound=outbound,
        onboarding=onboarding,
        importer=ImportRunner(
            commands, Extracting(sessions, memories, tool_caller, embedder, clock), outbound
        ),
        embedded=embedded,
        coordination=coordination,
        autocommit=autocommit,
        commands=commands,
    )
    if isinstance(conversation.turns, SharedTurnLocks):
        core.closers.append(conversation.turns.aclose)
    for client in (model, embedder):
        closer = getattr(client, "aclose", None)
        if closer is not None:
            core.closers.append(closer)
    log.info("core.ready", embedded_database=embedded is not None)
    return core
