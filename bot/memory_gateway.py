"""The conversation's view of the memory tiers: context for a turn, the memory tools
(`remember` and `confirm_memory` here, `update_memory`, `forget_memory` and
`search_memory` in `bot.memory_tools`) with the notice of what they changed, and the
background work after a turn (extraction, summaries, memory notices, the daily question
about an unsure memory)."""

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
from bot.memory_tools import MEMORY_TOOLS, MemoryTools, ToolChange, ToolOutcome
from bot.prompting import MemoryContext, TurnWindow
from memory.care.provenance import turn_message_ids
from memory.care.repository import SqlMemoryRepository
from memory.learning.affirmation import affirm_memory
from memory.learning.extraction import due_sessions, extract_session, remember_explicit
from memory.learning.reconcile import CONFIDENCE_FLOOR
from memory.learning.session_summary import fold_running_summary
from memory.learning.unsure import next_to_ask
from memory.recall.retrieval import mark_recalled
from memory.recall.within import DEFAULT_DEADLINE, assemble_within
from memory.store.conversations import SqlConversationStore
from memory.store.database import Database
from memory.store.errors import NotAboutThePerson
from memory.store.items import ExtractionOutcome, MemoryItem, UpdateQuestion, content_hash
from memory.store.ports import Clock, Embedder, TextWriter, ToolCaller
from memory.store.records import ConversationSession, Inbound, MemoryUse, Person

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


CONFIRM_TOOL = ToolSpec(
    name="confirm_memory",
    description=(
        "Call when the person affirms something you remember about them (they say it is "
        "right, or say it again: 'yes, I still work at the bakery'). Only for their own "
        "life, only what they affirmed; it makes that memory surer and keeps it in mind."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": "The remembered item they affirmed, as you remember it, "
                "e.g. 'Works at the bakery on Elm Street'.",
                "maxLength": 500,
            }
        },
        "required": ["text"],
    },
)
CONFIRM_MATCH = 0.80  # how close the tool's text must be to a memory to confirm it


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """Knobs of the memory tiers."""

    budget_tokens: int = 1500
    extract_every_n: int = 8
    confidence_floor: float = CONFIDENCE_FLOOR
    recall_deadline: float = DEFAULT_DEADLINE
    """Seconds a turn waits for its memory block before going on with what is at hand."""


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


class ToolNotice(Protocol):
    """The short notice of what the model's memory tools changed in a turn, with an Undo
    button per change (the command UI provides it: `bot.commands.notices.tool_notice`);
    without `quoting`, a forgotten memory is named by its id only."""

    async def __call__(
        self, person: Person, changes: Sequence[ToolChange], *, quoting: bool = True
    ) -> Reply: ...


AskUpdate = Callable[[Person, UpdateQuestion], Awaitable[Reply]]
"""Words and buttons of the question put to a person when their new words contradict a
memory they set themselves (the command UI provides it: `bot.commands.questions`)."""
AskUnsure = Callable[[Person, MemoryItem], Awaitable[Reply]]
"""Words and buttons of "Did I get this right?" about an unsure memory
(`bot.commands.unsure`)."""


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
        tool_notice: ToolNotice,
        settings: MemorySettings,
        autocommit: Database | None = None,
        ask_unsure: AskUnsure | None = None,
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
        self._ask_unsure = ask_unsure
        self._settings = settings
        self.notices = notices
        self._tool_notice = tool_notice
        self._tools = MemoryTools(
            sessions=sessions, memories=memories, embedder=embedder, clock=clock
        )
        self._changes: dict[tuple[int, int], list[ToolChange]] = {}

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """Tools the model may call during a private conversation (a group gets none)."""
        return (REMEMBER_TOOL, CONFIRM_TOOL, *MEMORY_TOOLS)

    async def context_for(
        self, person: Person, session: ConversationSession, query: str
    ) -> MemoryContext:
        """The memory block for this turn, standing part and this turn's part, within the
        recall deadline (a slow or failing recall degrades, never fails the turn: see
        `memory.recall.within`); the recalls it shows are counted afterwards."""
        now = self._clock.now()
        turn = await assemble_within(
            self._autocommit,
            self._embedder,
            user_id=person.id,
            query=query,
            now=now,
            timezone=person.timezone,
            budget_tokens=self._settings.budget_tokens,
            deadline=self._settings.recall_deadline,
            session_id=session.id,
            with_last_summary=not session.summary,
            standing_since=session.started_at,
        )
        assembled = turn.context
        use = MemoryUse(assembled.tokens, assembled.cut, assembled.recalled, turn.degraded)
        metrics.record_memory_block(use, need=turn.plan.need)
        if assembled.recalled_ids:
            self._recalls += 1
            self._background.spawn(
                mark_recalled(
                    self._sessions, user_id=person.id, memory_ids=assembled.recalled_ids, now=now
                ),
                key=f"recalled:{person.id}:{self._recalls}",
            )
        return MemoryContext(assembled.standing, assembled.this_turn, use)

    async def run_tool(self, person: Person, message_id: int, call: ToolCall) -> str:
        """Carry out one of the model's memory tool calls in the turn answering
        `message_id`; a change it makes waits for the turn's notice (`with_turn_notice`)."""
        if call.name not in {tool.name for tool in self.tools}:
            return "Nothing was saved or changed: unknown tool."
        sources = await turn_message_ids(self._sessions, user_id=person.id, message_id=message_id)
        if call.name == REMEMBER_TOOL.name:
            outcome = await self._remember(person, call, sources)
        elif call.name == CONFIRM_TOOL.name:
            outcome = await self._confirm(person, call, sources)
        else:
            outcome = await self._tools.run(person, call, sources)
        if outcome.change is not None:
            self._changes.setdefault((person.id, message_id), []).append(outcome.change)
        return outcome.text

    async def with_turn_notice(self, person: Person, message_id: int, reply: Reply) -> Reply:
        """`reply` with the notice of what the tools changed in this turn below it (Undo
        buttons included): the answer to the person's own message, so never held."""
        changes = self._changes.pop((person.id, message_id), [])
        if not changes:
            return reply
        notice = await self._tool_notice(person, changes)
        text = f"{reply.text}\n\n{notice.text}" if reply.text else notice.text
        return Reply(text, notice.buttons, private=reply.private or notice.private)

    def turn_over(self, person: Person, message_id: int) -> None:
        """A turn ended: a change its reply did not carry (the turn failed after the tool
        ran) is noticed on its own later, in the person's allowed window."""
        changes = self._changes.pop((person.id, message_id), [])
        if changes:
            self._background.spawn(
                self._notice_later(person, changes), key=f"tool-notice:{message_id}"
            )

    async def _notice_later(self, person: Person, changes: Sequence[ToolChange]) -> None:
        """Saved and updated memories go as a memory notice (held by id, shown only if
        still live when it goes out); what was forgotten by its id alone, so no held text
        keeps the words of a memory the person let go."""
        kept = [change.item for change in changes if change.kind != "forgot"]
        if kept:
            await self.send_notice(person, items=kept)
        gone = [change for change in changes if change.kind == "forgot"]
        if gone:
            notice = await self._tool_notice(person, gone, quoting=False)
            await self.send_notice(person, reply=notice)

    async def _remember(self, person: Person, call: ToolCall, sources: list[int]) -> ToolOutcome:
        """The model's `remember` call; the memory records the turn's messages
        (`sources`: the message and the rest of its burst), so forgetting it hides them."""
        text = str(call.input.get("text", "")).strip()[:500]
        if not text:
            return ToolOutcome("Nothing was saved: empty text.")
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
            return ToolOutcome(
                "Nothing was saved: that is a claim about your own role or rules (or other "
                "people's data), not a fact of the person's life. Tell them so, kindly."
            )
        log.info("memory.saved_by_tool", memory_id=item.id)
        return ToolOutcome(
            f"Saved as {item.label}. The person sees a note with an Undo button.",
            ToolChange("saved", item),
        )

    async def _confirm(self, person: Person, call: ToolCall, sources: list[int]) -> ToolOutcome:
        """Carry out `confirm_memory`: affirm the live memory that says the call's text
        (the same words, or a close paraphrase), recording the turn's messages (`sources`)
        as its sources."""
        text = str(call.input.get("text", "")).strip()[:500]
        if not text:
            return ToolOutcome("Nothing was confirmed: empty text.")
        known = await self._memories.by_hash(person.id, content_hash(text))
        if known is None:
            (vector,) = await self._memories.embed([text])
            near = await self._memories.similar(
                person.id, vector, limit=1, min_similarity=CONFIRM_MATCH
            )
            known = near[0][0] if near else None
        if known is None:
            return ToolOutcome(
                "Nothing was confirmed: no remembered item says that. Use remember if it is new."
            )
        item = await affirm_memory(
            self._memories, person.id, known.short_id, via="tool", source_message_ids=sources
        )
        if item is None:
            return ToolOutcome("Nothing was confirmed: that memory changed meanwhile.")
        if known.unsure:
            metrics.record_unsure("confirmed")
        return ToolOutcome(f"Confirmed {item.label}: it is surer now and stays in mind.")

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
            min_confidence=self._settings.confidence_floor,
        )
        metrics.record_extraction(outcome)
        if any(not item.unsure for item in outcome.items) and person.memory_notices:
            await self._notify(person, outcome)
        for question in outcome.questions:
            await self._send(person, await self._ask_update(person, question))
        await self.ask_unsure(person)
        return outcome

    async def ask_unsure(self, person: Person) -> bool:
        """Put one unsure memory to the person ("Did I get this right?"), at most one a
        day, in their allowed window like every message the companion starts."""
        if self._ask_unsure is None:
            return False
        item = await next_to_ask(self._memories, person.id)
        if item is None:
            return False
        await self._send(person, await self._ask_unsure(person, item))
        metrics.record_unsure("asked")
        return True

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
        """One short notice per extraction pass, with an Undo button per item (unsure
        items are asked about instead, one a day)."""
        await self.send_notice(person, items=[i for i in outcome.items if not i.unsure])

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
