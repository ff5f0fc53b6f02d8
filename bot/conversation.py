"""The conversation use case: one message in, one reply out.

The message is stored before anything else, so nothing a person writes is lost when
the model is down; it then stays in the session and is in context on the next turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Protocol

import structlog

from bot import metrics
from bot.background import BackgroundTasks
from bot.domain import IncomingMessage, Reply
from bot.errors import LLMUnavailable
from bot.llm import LLM, Completion, LLMRequest, ToolCall, ToolResult, ToolSpec
from bot.logs import bind_person
from bot.prompting import MemoryContext, TurnWindow, session_system, turn_context
from bot.text import clean_text
from bot.transcript import TIME_NOTES, fit_history
from bot.turns import TurnLocks
from memory.recall.tokens import estimate_tokens
from memory.store.conversations import SqlConversationStore
from memory.store.ports import Clock
from memory.store.records import (
    ConversationSession,
    Inbound,
    MemoryUse,
    Person,
    StoredMessage,
    TokenUsage,
)

log = structlog.get_logger(__name__)

EMPTY_REPLY = "I didn't catch anything there — send me a few words whenever you like."
APOLOGY = (
    "Sorry — I can't think straight right now (my language model isn't answering). "
    "Your message is saved, and I'll have it in mind when you write again."
)
MAX_TOOL_ROUNDS = 2
CONTEXT_STEP_TOKENS = 500
"""The turn's context is reserved in steps of this size: it changes size every turn,
and the history's budget should not (where old turns are cut is the cached prefix)."""
GROUP_NOTE = (
    "This is a group chat: other people read your reply. Do not mention anything personal "
    "you know about the person from private conversations."
)


@dataclass(frozen=True, slots=True)
class ConversationConfig:
    """The knobs of a turn."""

    idle_gap: timedelta = timedelta(minutes=30)
    recent_past: timedelta = timedelta(hours=48)
    """How far back earlier sessions reach into the prompt (their turns or summaries)."""
    context_tokens: int = 12000
    reply_max_tokens: int = 1024
    max_message_chars: int = 8000


class MemoryGateway(Protocol):
    """What a turn asks of the memory tiers (absent: the companion remembers nothing)."""

    @property
    def tools(self) -> tuple[ToolSpec, ...]: ...

    async def context_for(
        self, person: Person, session: ConversationSession, query: str
    ) -> MemoryContext:
        """The delimited memory block for this turn, split into its standing part and the
        part for this message (each '' when there is nothing)."""
        ...

    async def run_tool(self, person: Person, message_id: int, call: ToolCall) -> str:
        """Carry out a tool call the model made; the text goes back to the model."""
        ...

    async def with_turn_notice(self, person: Person, message_id: int, reply: Reply) -> Reply:
        """`reply` with the notice of what this turn's tool calls changed, if anything."""
        ...

    def turn_over(self, person: Person, message_id: int) -> None:
        """The turn ended; what its reply did not carry is noticed later."""
        ...

    def after_turn(self, person: Person, inbound: Inbound, window: TurnWindow) -> None:
        """Schedule background work (extraction, summaries) after a turn; `window` says
        how long the session has grown, so no query is needed to decide."""
        ...


class ReplyExtras(Protocol):
    """What may be added to a reply after it is stored (the timezone question or an offer
    to set it: never part of what the model said)."""

    async def after_reply(self, person: Person, incoming: IncomingMessage, reply: Reply) -> Reply:
        """`reply`, perhaps with something added."""
        ...


class EditIntake(Protocol):
    """Takes a message as the new text of a memory the person pressed Edit on."""

    async def complete(self, inbound: Inbound) -> Reply | None:
        """The reply to the edit, or None when no edit was waiting after all."""
        ...


@dataclass(frozen=True, slots=True)
class Conversation:
    """The collaborators of a turn."""

    store: SqlConversationStore
    llm: LLM
    clock: Clock
    persona: str
    config: ConversationConfig
    background: BackgroundTasks
    memory: MemoryGateway | None = None
    turns: TurnLocks = field(default_factory=TurnLocks)
    extras: ReplyExtras | None = None
    edits: EditIntake | None = None


async def record_message(incoming: IncomingMessage, *, conversation: Conversation) -> None:
    """Store a message without answering it yet (the first messages of a burst).

    The turn that answers the burst's last message sees these in the session.
    """
    text = clean_text(incoming.text)
    if text:
        await _record(incoming, text, conversation)


async def handle_message(incoming: IncomingMessage, *, conversation: Conversation) -> Reply:
    """Store the person's message, ask the model, store and return the reply."""
    text = clean_text(incoming.text)
    if not text:
        return Reply(EMPTY_REPLY)
    inbound = await _record(incoming, text, conversation)
    person, message = inbound.person, inbound.message
    with bind_person(user_id=person.id, platform=incoming.platform):
        if inbound.duplicate and message.status in ("answered", "command"):
            log.info("conversation.duplicate_ignored", message_id=message.id)
            return Reply("", silent=True)
        async with conversation.turns.hold(person.id):
            edited = await _edit_waiting(incoming, inbound, conversation)
            try:
                return edited or await _answer(incoming, inbound, conversation)
            finally:
                if conversation.memory is not None:
                    conversation.memory.turn_over(person, message.id)


async def _edit_waiting(
    incoming: IncomingMessage, inbound: Inbound, c: Conversation
) -> Reply | None:
    """After an Edit button, the person's next private message is the memory's new text,
    not conversation (`inbound.pending_edit` comes with the message, at no extra query)."""
    if inbound.pending_edit is None or not incoming.is_private or c.edits is None:
        return None
    return await c.edits.complete(inbound)


async def _record(incoming: IncomingMessage, text: str, conversation: Conversation) -> Inbound:
    """Store the message; count it the first time it is stored (not when redelivered)."""
    inbound = await conversation.store.record_inbound(
        platform=incoming.platform,
        platform_user_id=incoming.platform_user_id,
        chat_id=incoming.chat_id,
        display_name=incoming.display_name,
        text=text,
        platform_message_id=incoming.platform_message_id,
        now=conversation.clock.now(),
        idle_gap=conversation.config.idle_gap,
        private_chat=incoming.is_private,
    )
    if not inbound.duplicate:
        metrics.record_message(incoming.platform, "message")
    return inbound


async def _answer(incoming: IncomingMessage, inbound: Inbound, c: Conversation) -> Reply:
    person, message = inbound.person, inbound.message
    limit = c.config.max_message_chars
    if len(message.content) > limit:
        await c.store.mark_message(user_id=person.id, message_id=message.id, status="too_long")
        log.info("conversation.too_long", chars=len(message.content))
        return Reply(
            f"That's a long one ({len(message.content):,} characters). I've saved all of it, "
            f"but I can only read {limit:,} characters at a time — could you send it in "
            "smaller parts?"
        )
    built = await _build_request(incoming, inbound, c)
    if built is None:
        # The turn before this one answered it (a redelivered update, or a burst).
        log.info("conversation.answered_meanwhile", message_id=message.id)
        return Reply("", silent=True)
    request, window, memory_use = built
    try:
        completion = await _complete(request, inbound, c)
    except LLMUnavailable as exc:
        log.warning("conversation.llm_unavailable", error=str(exc)[:200])
        await c.store.mark_message(user_id=person.id, message_id=message.id, status="unanswered")
        await c.store.add_reply(
            user_id=person.id,
            session_id=inbound.session.id,
            text=APOLOGY,
            platform=incoming.platform,
            chat_id=incoming.chat_id,
            now=c.clock.now(),
            status="apology",
        )
        return await _noticed(Reply(APOLOGY), inbound, c)
    reply_text = completion.text.strip() or "…"
    await c.store.add_reply(
        user_id=person.id,
        session_id=inbound.session.id,
        text=reply_text,
        platform=incoming.platform,
        chat_id=incoming.chat_id,
        now=c.clock.now(),
        usage=TokenUsage(
            model=completion.model,
            input_tokens=completion.usage.input_tokens,
            output_tokens=completion.usage.output_tokens,
            cache_read_tokens=completion.usage.cache_read_tokens,
            cache_write_tokens=completion.usage.cache_write_tokens,
        ),
        # Messages stored while this turn was built were in its prompt too: answered.
        answers_through=max(message.id, window.last_user_message_id or 0),
        memory=memory_use,
    )
    log.info(
        "conversation.replied",
        input_tokens=completion.usage.input_tokens,
        output_tokens=completion.usage.output_tokens,
        cache_read_tokens=completion.usage.cache_read_tokens,
    )
    if c.memory is not None:
        c.memory.after_turn(person, inbound, window)
    reply = await _noticed(Reply(reply_text), inbound, c)
    if c.extras is not None:
        return await c.extras.after_reply(person, incoming, reply)
    return reply


async def _noticed(reply: Reply, inbound: Inbound, c: Conversation) -> Reply:
    """The reply with the notice of what the model's memory tools changed this turn."""
    if c.memory is None:
        return reply
    return await c.memory.with_turn_notice(inbound.person, inbound.message.id, reply)


async def _complete(request: LLMRequest, inbound: Inbound, c: Conversation) -> Completion:
    exchange: list[tuple[tuple[ToolCall, ...], tuple[ToolResult, ...]]] = []
    for _ in range(MAX_TOOL_ROUNDS + 1):
        completion = await c.llm.complete(request)
        if (
            not completion.tool_calls
            or c.memory is None
            or not request.tools  # a call to a tool not offered (a group chat) is not run
            or len(exchange) >= MAX_TOOL_ROUNDS
        ):
            return completion
        results = []
        for call in completion.tool_calls:
            outcome = await c.memory.run_tool(inbound.person, inbound.message.id, call)
            results.append(ToolResult(call.id, outcome))
        exchange.append((completion.tool_calls, tuple(results)))
        request = _with_exchange(request, tuple(exchange))
    return completion


def _with_exchange(
    request: LLMRequest, exchange: tuple[tuple[tuple[ToolCall, ...], tuple[ToolResult, ...]], ...]
) -> LLMRequest:
    return replace(request, tool_exchange=exchange)


async def _build_request(
    incoming: IncomingMessage, inbound: Inbound, c: Conversation
) -> tuple[LLMRequest, TurnWindow, MemoryUse | None] | None:
    """The prompt of a turn (and what its memory block cost), or None when the message
    was answered meanwhile. The history (this session, and the recent past of earlier
    ones) and the memory block are read side by side. In a group, others read the reply:
    no memory, no summaries of private talk, and only this group's own turns.

    In prompt-cache order: persona, standing memory, the session's system part, the
    turns; the time and the memory for this message lead the last user turn."""
    person, session, private = inbound.person, inbound.session, incoming.is_private
    now = c.clock.now()
    reading = c.store.history(
        user_id=person.id,
        session_id=session.id,
        after_id=session.summarized_through if private else None,
        chat_id=None if private else incoming.chat_id,
        since=now - c.config.recent_past,
        with_summaries=private,
    )
    memory = MemoryContext()
    if c.memory is not None and private:
        history, memory = await asyncio.gather(
            reading, _memory_context(c.memory, person, session, inbound.message.content)
        )
    else:
        history = await reading
    if await _answered(history.current, inbound, c):
        return None
    summary = session.summary if private else ""
    context = turn_context(now=now, timezone=person.timezone, memory=memory.this_turn)
    fixed = (c.persona, memory.standing, _system(inbound, summary, private), TIME_NOTES)
    budget = (
        c.config.context_tokens
        - sum(map(estimate_tokens, fixed))
        - _rounded_up(estimate_tokens(context), CONTEXT_STEP_TOKENS)
        - c.config.reply_max_tokens
    )
    window = fit_history(
        history,
        max(budget, 500),
        timezone=person.timezone,
        now=now,
        extracted_through=session.extracted_through,
        running_summary=private and session.summarized_through is not None,
        shown_elsewhere=f"{memory.standing}\n{memory.this_turn}",
    )
    if window.dropped:
        log.info("conversation.turns_dropped", dropped=window.dropped)
    request = LLMRequest(
        role="chat",
        stable_system=c.persona,
        standing_system=memory.standing,
        dynamic_system=_system(inbound, summary, private, window=window),
        turns=window.turns,
        turn_context=context,
        tools=c.memory.tools if c.memory is not None and private else (),  # no tools in groups
        max_tokens=c.config.reply_max_tokens,
    )
    return request, window, memory.use


async def _memory_context(
    gateway: MemoryGateway, person: Person, session: ConversationSession, query: str
) -> MemoryContext:
    """The turn's memory block; when assembling it fails outright, no memory (the turns
    alone): a memory failure never costs the reply. Counted as a degraded turn."""
    try:
        return await gateway.context_for(person, session, query)
    except Exception as exc:
        log.warning("conversation.memory_failed", error=type(exc).__name__)
        metrics.record_degraded("context_error")
        return MemoryContext(use=MemoryUse(degraded="context_error"))


def _rounded_up(tokens: int, step: int) -> int:
    return -(-tokens // step) * step


def _system(
    inbound: Inbound, summary: str, private: bool, *, window: TurnWindow | None = None
) -> str:
    """The session's system part (it changes between sessions, not between turns); with
    the `window`, its summaries of earlier sessions and the explanation of its time
    notes."""
    person = inbound.person
    system = session_system(
        display_name=person.display_name,
        summary=summary,
        earlier=window.summaries if window is not None else "",
    )
    notes = [TIME_NOTES] if window is not None and window.timed else []
    if not private:
        notes.append(GROUP_NOTE)
    return "\n\n".join([system, *notes]) if system else "\n\n".join(notes)


async def _answered(messages: list[StoredMessage], inbound: Inbound, c: Conversation) -> bool:
    """Whether a reply already answered this message (read from the session's turns,
    or asked for when it is no longer among them)."""
    mine = next((m for m in messages if m.id == inbound.message.id), None)
    if mine is not None:
        return mine.status == "answered"
    status = await c.store.message_status(user_id=inbound.person.id, message_id=inbound.message.id)
    return status == "answered"
