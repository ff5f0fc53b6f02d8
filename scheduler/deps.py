"""What the scheduler's jobs need: their knobs (`SchedulerConfig`) and collaborators
(`SchedulerDeps`), built once from the `Core`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import time, timedelta

import numpy as np

from bot.bootstrap import Core
from bot.import_progress import ImportRunner
from bot.llm import LLM
from bot.llm_tools import LLMToolCaller
from bot.memory_gateway import MemoryServices
from bot.outbound import Outbound
from bot.prompting import load_persona
from bot.timezone_onboarding import TimezoneOnboarding
from memory.care.repository import SqlMemoryRepository
from memory.store.conversations import SqlConversationStore
from memory.store.coordination import SqlCoordination
from memory.store.database import Database, Engine
from memory.store.ports import Clock, Embedder, ToolCaller, Vector


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """The scheduler's knobs; the defaults are the documented behaviour."""

    batch_size: int = 500  # people claimed per check-in transaction
    concurrency: int = 8  # messages composed and sent at once (claimed as slots free up)
    grace: timedelta = timedelta(hours=2)  # a later check-in is skipped as missed
    spread: timedelta = timedelta(minutes=20)  # each person's stable offset after their time
    recent_activity: timedelta = timedelta(hours=3)  # they wrote: no need to reach out
    max_unanswered: int = 3  # proactive messages in a row without an answer: back off
    lease: timedelta = timedelta(minutes=10)  # a claimed row is another's after this
    retry_delay: timedelta = timedelta(minutes=5)  # before composing again
    max_attempts: int = 3  # compose attempts before a row fails
    followup_delay: timedelta = timedelta(hours=2)  # after the event's time
    followup_window: timedelta = timedelta(days=3)  # older events are not followed up
    patrol_time: time = time(3, 0)  # local time of the nightly patrol and diary
    patrol_batch: int = 1000  # people per patrol transaction
    idle_gap: timedelta = timedelta(minutes=30)  # a session idle this long is closed
    llm_steps: bool = True  # merge text, diary, extraction retries (needs a model key)
    memory_budget_tokens: int = 1500  # memory in a check-in prompt
    memory_retention_days: int = 90  # dead memories are deleted this long after; 0 keeps
    tick_seconds: float = 60.0  # check-ins, follow-ups, outbox recovery
    nightly_seconds: float = 600.0  # patrol and diary for people past their 03:00
    sweep_seconds: float = 60.0  # close idle sessions and extract them
    import_seconds: float = 30.0  # one extraction window of each running import
    pending_import_kept: timedelta = timedelta(days=7)  # an import nobody started is deleted
    misfire_grace_seconds: int = 30


def config_from(core: Core, **overrides: object) -> SchedulerConfig:
    """The configuration for this core: LLM steps only with a model key."""
    values: dict[str, object] = {
        "llm_steps": core.settings.has_llm,
        "idle_gap": timedelta(minutes=core.settings.session_idle_minutes),
        "memory_budget_tokens": core.settings.memory_budget_tokens,
        "memory_retention_days": core.settings.memory_retention_days,
        "import_seconds": core.settings.import_batch_seconds,
        "concurrency": core.settings.checkin_concurrency,
        "grace": timedelta(minutes=core.settings.checkin_grace_minutes),
        "spread": timedelta(minutes=core.settings.checkin_spread_minutes),
    }
    values.update(overrides)
    return SchedulerConfig(**values)  # type: ignore[arg-type]


class RepositoryEmbedder:
    """The memory repository's embedder, as the `Embedder` port (extraction needs one)."""

    def __init__(self, memories: SqlMemoryRepository, dim: int) -> None:
        self._memories = memories
        self._dim = dim

    @property
    def dim(self) -> int:
        """The vector width."""
        return self._dim

    @property
    def name(self) -> str:
        """A label for logs."""
        return "memory-repository"

    async def embed(self, texts: list[str]) -> Vector:
        """One unit vector per text."""
        rows = await self._memories.embed(texts)
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self._dim)


@dataclass(frozen=True)
class SchedulerDeps:
    """The collaborators of every job."""

    engine: Engine
    sessions: Database
    store: SqlConversationStore
    memories: SqlMemoryRepository
    memory: MemoryServices
    outbound: Outbound
    llm: LLM
    tool_caller: ToolCaller
    embedder: Embedder
    clock: Clock
    persona: str
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    onboarding: TimezoneOnboarding | None = None  # the second timezone question
    importer: ImportRunner | None = None  # imported chat history, a batch at a time
    coordination: SqlCoordination | None = None  # turn claims, bursts, rate buckets
    autocommit: Database | None = None  # for lone statements (else `sessions`)


def lone(deps: SchedulerDeps) -> Database:
    """The sessions for one statement on its own (a read, or a write that is atomic by
    itself): autocommit ones when the core has them, sparing the transaction's round trips."""
    return deps.autocommit or deps.sessions


def deps_from(core: Core, config: SchedulerConfig | None = None) -> SchedulerDeps:
    """The jobs' collaborators, taken from the core."""
    return SchedulerDeps(
        engine=core.engine,
        sessions=core.sessions,
        store=core.store,
        memories=core.memories,
        memory=core.memory,
        outbound=core.outbound,
        llm=core.llm,
        tool_caller=LLMToolCaller(core.llm),
        embedder=RepositoryEmbedder(core.memories, core.settings.embedding_dim),
        clock=core.clock,
        persona=load_persona(core.settings.persona_file),
        config=config or config_from(core),
        onboarding=core.onboarding,
        importer=core.importer,
        coordination=core.coordination,
        autocommit=core.autocommit,
    )
