"""The conversation's view of the memory tiers: context for a turn, the `remember` tool,
and the background work after a turn (extraction, summaries, memory notices)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

import structlog

from bot import metrics
from bot.background import BackgroundTasks
from bot.domain import Reply
from bot.llm import ToolCall, ToolSpec
from bot.prompting import MemoryContext, TurnWindow
from memory.care.provenance import turn_message_ids
from memory.care.repository import SqlMemoryRepository
from memory.learning.extraction import due_sessions, extract_session, remember_explicit
from memory.learning.session_summary import fold_running_summary
from memory.recall.context import assemble_context
from memory.recall.retrieval import mark_recalled
from memory.store.conversations import SqlConversationStore
from memory.store.database import Database
from memory.store.errors import NotAboutThePerson
from memory.store.items import ExtractionOutcome, MemoryItem, UpdateQuestion
from memory.store.ports import Clock, Embedder, TextWriter, ToolCaller
from memory.store.records import ConversationSession, Inbound, Person

log = structlog.get_logger(__name__)

REMEMBER_TOOL = ToolSpec(
    name="remember",
    description=(
        "Save something the person explicitly asked you to remember (e.g. 'remember that "
        "my sister's birthday is 4 May'). Only for explicit requests about their own life."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": "What to remember, in third person, e.g. 'Their sister's "
                "birthday is 4 May'.",
                "maxLength": 500,
            }
        },
        "required": ["text"],
    },
)


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """Knobs of the memory tiers."""

    budget_tokens: int = 1500
    extract_every_n: int = 8


class Notices(Protocol):
    """Sends what the companion starts in the person's allowed window, or holds it for
    that window (`bot.notice_window.NoticeWindow`)."""

    async def send_or_hold(
        self, person: Person, *, items: Sequence[MemoryItem] = (), reply: Reply | None = None
    ) -> str:
        """Send a memory notice about `items` (or `reply`) now or hold it; how it went."""
        ...

    async def release(self, *, limit: int = 200) -> Counter[str]:
        """Send the held notices whose window has opened; counts by outcome."""
        ...


AskUpdate = Callable[[Person, UpdateQuestion], Awaitable[Reply]]
"""Words and buttons of the question put to a person when their new words contradict a
memory they set themselves (the command UI provides it: `bot.commands.questions`)."""


class MemoryServices:
    """Implements the conversation's `MemoryGateway` on the memory layer."""

    def __init__(
        self,
        *,
        sessions: Database,
        store: SqlConversationStore,
        memories: SqlMemoryRepository,
        embedder: Embedder,
        tool_caller: ToolCaller,
        writer: TextWriter,
        clock: Clock,
        background: BackgroundTasks,
        notices: Notices,
        ask_update: AskUpdate,
        settings: MemorySettings,
        autocommit: Database | None = None,
    ) -> None:
        self._sessions = sessions
        self._autocommit = autocommit or sessions
        self._recalls = 0
        self._store = store
        self._memories = memories
        self._embedder = embedder
        self._tool_caller = tool_caller
        self._writer = writer
        self._clock = clock
        self._background = background
        self._ask_update = ask_update
        self._settings = settings
        self.notices = notices

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """Tools the model may call during a private conversation (a group gets none)."""
        return (REMEMBER_TOOL,)

    async def context_for(
        self, person: Person, session: ConversationSession, query: str
    ) -> MemoryContext:
        """The memory block for this turn, standing part and this turn's part; the recalls
        it shows are counted afterwards."""
        now = self._clock.now()
        assembled = await assemble_context(
            self._autocommit,
            self._embedder,
            user_id=person.id,
            query=query,
            now=now,
            timezone=person.timezone,
            budget_tokens=self._settings.budget_tokens,
            session_id=session.id,
            with_last_summary=not session.summary,
            standing_since=session.started_at,
        )
        if assembled.recalled_ids:
            self._recalls += 1
            self._background.spawn(
                mark_recalled(
                    self._sessions, user_id=person.id, memory_ids=assembled.recalled_ids, now=now
                ),
                key=f"recalled:{person.id}:{self._recalls}",
            )
        return MemoryContext(assembled.standing, assembled.this_turn)

    async def run_tool(self, person: Person, message_id: int, call: ToolCall) -> str:
        """Carry out the model's `remember` call; the memory records the turn's messages
        (`message_id` and the rest of its burst), so forgetting it hides those words."""
        text = str(call.input.get("text", "")).strip()[:500]
        if call.name != REMEMBER_TOOL.name or not text:
            return "Nothing was saved: unknown tool or empty text."
        sources = await turn_message_ids(self._sessions, user_id=person.id, message_id=message_id)
        try:
            item = await remember_explicit(
                user_id=person.id,
                text=text,
                memories=self._memories,
                llm=self._tool_caller,
                clock=self._clock,
                timezone=person.timezone,
                source_message_ids=sources,
            )
        except NotAboutThePerson:
            return (
                "Nothing was saved: that is a claim about your own role or rules (or other "
                "people's data), not a fact of the person's life. Tell them so, kindly."
            )
        log.info("memory.saved_by_tool", memory_id=item.id)
        return f"Saved as {item.label}. The person can see it with /memory."

    def after_turn(self, person: Person, inbound: Inbound, window: TurnWindow) -> None:
        """Extract closed or long-running sessions and fold long ones, in the background."""
        if inbound.closed_session_id is not None:
            self.schedule_extraction(person, inbound.closed_session_id)
        if window.unextracted >= self._settings.extract_every_n:
            self.schedule_extraction(person, inbound.session.id)
        if window.needs_summary:
            self._background.spawn(
                fold_running_summary(
                    sessions=self._sessions,
                    user_id=person.id,
                    session_id=inbound.session.id,
                    writer=self._writer,
                    timezone=person.timezone,
                    budget_tokens=window.budget_tokens,
                    embedder=self._embedder,
                ),
                key=f"summary:{inbound.session.id}",
            )

    def schedule_extraction(self, person: Person, session_id: int) -> None:
        """Extract a session in the background (once at a time per session)."""
        self._background.spawn(self.extract(person, session_id), key=f"extract:{session_id}")

    async def extract(self, person: Person, session_id: int) -> ExtractionOutcome:
        """Run extraction for one session and tell the person what was noted."""
        outcome = await extract_session(
            user_id=person.id,
            session_id=session_id,
            sessions=self._sessions,
            memories=self._memories,
            llm=self._tool_caller,
            embedder=self._embedder,
            clock=self._clock,
            timezone=person.timezone,
        )
        metrics.record_extraction(outcome)
        if outcome.items and person.memory_notices:
            await self._notify(person, outcome)
        for question in outcome.questions:
            await self._send(person, await self._ask_update(person, question))
        return outcome

    async def sweep(self, *, idle_gap: timedelta, limit: int = 50) -> int:
        """Close idle sessions, embed messages stored while the embedder was failing, and
        extract every session that is due; returns how many extractions ran.

        Sessions whose extraction keeps failing are retried here, up to a limit of attempts
        (the nightly patrol retries the rest).
        """
        await self._store.close_idle_sessions(now=self._clock.now(), idle_gap=idle_gap)
        await self._store.backfill_embeddings()
        due = await due_sessions(
            self._sessions, every_n=self._settings.extract_every_n, limit=limit
        )
        people = {p.id: p for p in await self._store.persons_by_ids([u for u, _ in due])}
        for user_id, session_id in due:
            if user_id in people:
                await self.extract(people[user_id], session_id)
        return len(due)

    async def _notify(self, person: Person, outcome: ExtractionOutcome) -> None:
        """One short notice per extraction pass, with an Undo button per item."""
        await self.send_notice(person, items=outcome.items)

    async def send_notice(
        self, person: Person, *, items: Sequence[MemoryItem] = (), reply: Reply | None = None
    ) -> str:
        """The one way anything is sent from here on the companion's own initiative (a
        memory notice about `items`, or `reply`): at once in the person's allowed window,
        else held for it (see `bot.notice_window`)."""
        return await self.notices.send_or_hold(person, items=items, reply=reply)

    async def _send(self, person: Person, reply: Reply) -> None:
        """Send something extraction has to ask (an update question), in the person's
        allowed window like every message the companion starts."""
        await self.send_notice(person, reply=reply)
