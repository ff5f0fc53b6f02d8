"""The extraction → validation pipeline: what a stretch of conversation taught about the
person, checked in code before anything is stored. Runs in the background, never on the
reply path; explicit `/remember` requests go through `remember_explicit`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import structlog
from sqlalchemy import (
    BigInteger,
    Boolean,
    Select,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.learning.extraction_prompt import (
    CLASSIFY_SYSTEM,
    CLASSIFY_TOOL,
    EXTRACTION_SYSTEM,
    EXTRACTION_TOOL,
    Classification,
    ExtractionAnswer,
    classify_prompt,
    extraction_prompt,
    parse_answer,
    strip_memory_blocks,
)
from memory.learning.judge import judge_unseen
from memory.learning.lifespan import lifespan, parse_event_date
from memory.learning.reconcile import (
    CONFIDENCE_FLOOR,
    Plan,
    plans_from,
    save_explicit,
    store_plans,
)
from memory.learning.session_summary import summarise_closed_session
from memory.learning.system_claims import claims_power_over_system
from memory.local_time import zone_of
from memory.recall.memory_block import MEMORY_BLOCK_END as MEMORY_BLOCK_END
from memory.recall.memory_block import MEMORY_BLOCK_START as MEMORY_BLOCK_START
from memory.recall.relevant import relevant_memories
from memory.store.errors import AnswerTruncated, NotAboutThePerson
from memory.store.items import Candidate, ExtractionOutcome, MemoryItem
from memory.store.log_statements import stored_messages
from memory.store.memories import SqlMemories
from memory.store.memory_batch import Embedding, MemoryBatch
from memory.store.ports import Clock, Embedder, ToolCaller
from memory.store.records import StoredMessage
from memory.store.statuses import COMMAND, HIDDEN
from memory.store.tables import Message
from memory.store.tables import Session as SessionRow
from memory.store.threads import live_threads

log = structlog.get_logger(__name__)
_LABEL = re.compile(r"[mM]\d+")

MAX_MESSAGES = 100  # per run; the rest waits for the next run
KNOWN_IN_PROMPT = 40  # the memories most relevant to the window, not the most important
RETRY_MAX_TOKENS = 8192  # for an answer that stopped at the caller's default limit
TRUNCATION_RETRIES = 3  # the same window with more room, then half of it, then a quarter
THREADS_IN_PROMPT = 20
MAX_ATTEMPTS = 5  # beyond this, only the nightly patrol retries
EXPLICIT_MIN_IMPORTANCE = 5.0


@dataclass(frozen=True, slots=True)
class _Read:
    watermark: int | None
    messages: list[StoredMessage]
    has_more: bool
    closed: bool
    summary: str = ""
    """The session's running summary: what came before its unread messages."""


async def extract_session(
    *,
    user_id: int,
    session_id: int,
    sessions: async_sessionmaker[AsyncSession],
    memories: SqlMemories,
    llm: ToolCaller,
    embedder: Embedder,
    clock: Clock,
    timezone: str,
    min_importance: float = 3,
    summarise: bool = True,
    min_confidence: float = CONFIDENCE_FLOOR,
) -> ExtractionOutcome:
    """Extract, validate and store what the session's new messages say about the person;
    once a closed session is read to its end, summarise how it went (unless `summarise`
    is False: an imported old chat is not a conversation with the companion).

    Stores and the watermark commit together, and the watermark moves only over the
    messages the stored answer covered; on a model failure (a cut-off answer included,
    once retries run out) nothing is stored and the attempt is counted so the session is
    retried later.
    """
    read = await _read(sessions, user_id=user_id, session_id=session_id)
    if read is None:
        log.warning("memory.extraction_no_session", user_id=user_id, session_id=session_id)
        return ExtractionOutcome()
    asked = _Asking(
        llm, sessions, embedder, user_id, session_id, timezone, clock.now(), read.summary
    )
    try:
        run = await _extract_window(asked, read, min_importance, min_confidence)
    except Exception as exc:
        await _record_failure(sessions, user_id=user_id, session_id=session_id, error=exc)
        return ExtractionOutcome(failed=True)
    async with memories.batch(user_id) as batch:
        if not await _claim(batch, session_id, read.watermark):
            log.info("memory.extraction_raced", user_id=user_id, session_id=session_id)
            return ExtractionOutcome()
        outcome = await store_plans(batch, run.plans, run.vectors, session_id=session_id)
        through = run.window[-1].id if run.window else read.watermark
        await _advance(batch, session_id, through, run.has_more)
    outcome = replace(outcome, skipped=outcome.skipped + run.dropped)
    if summarise and read.closed and not run.has_more:
        await summarise_closed_session(
            sessions=sessions,
            user_id=user_id,
            session_id=session_id,
            llm=llm,
            timezone=timezone,
            embedder=embedder,
        )
    log.info(
        "memory.extracted",
        user_id=user_id,
        session_id=session_id,
        added=outcome.added,
        updated=outcome.updated,
        skipped=outcome.skipped,
    )
    return outcome


async def _read(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, session_id: int
) -> _Read | None:
    params = {"uid": user_id, "sid": session_id}
    async with sessions() as db:
        found = (await db.execute(_session_state(), params)).first()
        if found is None:
            return None
        params |= {"after": found[0] or 0, "limit": MAX_MESSAGES + 1}
        rows = (await db.execute(_unread(), params)).all()
    messages = [StoredMessage(*row) for row in rows[:MAX_MESSAGES]]
    return _Read(found[0], messages, len(rows) > MAX_MESSAGES, found[1] is not None, found[2] or "")


@functools.cache
def _session_state() -> Select[int | None, datetime | None, str]:
    """A session's watermark, closing time and running summary (bound: `uid`, `sid`)."""
    return select(SessionRow.extracted_through, SessionRow.closed_at, SessionRow.summary).where(
        SessionRow.id == bindparam("sid"), SessionRow.user_id == bindparam("uid")
    )


@functools.cache
def _unread() -> Any:
    """A session's messages past the watermark, oldest first (bound: `uid`, `sid`,
    `after`, `limit`)."""
    return (
        stored_messages()
        .where(
            Message.user_id == bindparam("uid"),
            Message.session_id == bindparam("sid"),
            Message.id > bindparam("after"),
        )
        .order_by(Message.id)
        .limit(bindparam("limit"))
    )


def _readable(messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    """What the model may read: no hidden (forgotten) words, no memory blocks."""
    return [
        replace(m, content=text)
        for m in messages
        if m.status not in (HIDDEN, COMMAND) and (text := strip_memory_blocks(m.content))
    ]


@dataclass(frozen=True, slots=True)
class _Asking:
    """Who and what one run asks the model about."""

    llm: ToolCaller
    sessions: async_sessionmaker[AsyncSession]
    embedder: Embedder
    user_id: int
    session_id: int
    timezone: str
    now: datetime
    summary: str = ""


@dataclass(frozen=True, slots=True)
class _Run:
    """What a run will store: the messages it read (`window`), whether more are left,
    the validated plans with their vectors, and how many candidates were dropped."""

    window: list[StoredMessage]
    has_more: bool
    plans: list[Plan]
    vectors: dict[str, Embedding]
    dropped: int


async def _extract_window(
    asking: _Asking, read: _Read, min_importance: float, min_confidence: float
) -> _Run:
    """Ask the model about the unread messages. An answer cut off at its token limit is
    never used: the same window is asked again with more room, then half of it, then a
    quarter (the rest waits for the next run); past that, the run fails."""
    window, has_more, max_tokens = read.messages, read.has_more, None
    for attempt in range(TRUNCATION_RETRIES + 1):
        shown = _readable(window)
        if not any(m.role == "user" for m in shown):
            return _Run(window, has_more, [], {}, 0)
        try:
            answer, known = await _ask(asking, shown, max_tokens)
        except AnswerTruncated:
            if attempt == TRUNCATION_RETRIES or len(window) < 2:
                raise
            if max_tokens is not None:
                window, has_more = window[: len(window) // 2], True
            max_tokens = RETRY_MAX_TOKENS
            log.warning(
                "memory.extraction_truncated",
                user_id=asking.user_id,
                session_id=asking.session_id,
                attempt=attempt + 1,
                next_window=len(window),
            )
            continue
        zone = zone_of(asking.timezone)
        plans, dropped = plans_from(answer, shown, zone, asking.now, min_importance, min_confidence)
        vectors = await _embed(asking.embedder, plans)
        plans = await judge_unseen(
            asking.llm,
            asking.sessions,
            user_id=asking.user_id,
            now=asking.now,
            plans=plans,
            vectors=vectors,
            shown=known,
        )
        return _Run(window, has_more, plans, vectors, dropped + len(answer.invalid))
    raise AssertionError("unreachable: the last attempt returns or raises")


async def _ask(
    asking: _Asking, shown: Sequence[StoredMessage], max_tokens: int | None
) -> tuple[ExtractionAnswer, set[int]]:
    """One `record_memories` call over `shown`, with the memories relevant to it (their
    ids are returned too); each item validated on its own (invalid ones are logged and
    dropped)."""
    user_id = asking.user_id
    said = [m.content for m in shown if m.role == "user"]
    known = await relevant_memories(
        asking.sessions,
        asking.embedder,
        user_id=user_id,
        texts=said,
        now=asking.now,
        limit=KNOWN_IN_PROMPT,
    )
    async with asking.sessions() as db:
        threads = [t.title for t in await live_threads(db, user_id, limit=THREADS_IN_PROMPT)]
    zone = zone_of(asking.timezone)
    prompt = extraction_prompt(
        shown,
        timezone=asking.timezone,
        zone=zone,
        now=asking.now,
        known=known,
        threads=threads,
        summary=asking.summary,
    )
    raw = await asking.llm.call_tool(
        system=EXTRACTION_SYSTEM,
        prompt=prompt,
        tool_name=EXTRACTION_TOOL.name,
        tool_description=EXTRACTION_TOOL.description,
        input_schema=EXTRACTION_TOOL.input_schema,
        max_tokens=max_tokens,
    )
    answer = parse_answer(raw)
    for reason in answer.invalid:
        log.info("memory.candidate_invalid", user_id=user_id, reason=reason)
    return answer, {item.id for item in known}


async def _embed(embedder: Embedder, plans: Sequence[Plan]) -> dict[str, Embedding]:
    verdicts = [
        text
        for p in plans
        for text in (p.supersedes, p.same_as)
        if text and not _LABEL.fullmatch(text)
    ]
    texts = list(dict.fromkeys([p.candidate.content for p in plans] + verdicts))
    if not texts:
        return {}
    matrix = await embedder.embed(texts)
    return {text: [float(x) for x in row] for text, row in zip(texts, matrix, strict=True)}


async def _claim(batch: MemoryBatch, session_id: int, watermark: int | None) -> bool:
    """Lock the session and check no other run moved its watermark since we read."""
    params = {"uid": batch.user_id, "sid": session_id}
    found = (await batch.db.execute(_claim_statement(), params)).first()
    return found is not None and found[0] == watermark


@functools.cache
def _claim_statement() -> Select[int | None]:
    return (
        select(SessionRow.extracted_through)
        .where(SessionRow.id == bindparam("sid"), SessionRow.user_id == bindparam("uid"))
        .with_for_update()
    )


async def _advance(
    batch: MemoryBatch, session_id: int, through: int | None, has_more: bool
) -> None:
    """Move the watermark; still due only if a closed session has more to read."""
    params = {
        "uid": batch.user_id,
        "sid": session_id,
        "through": through,
        "after": through or 0,
        "has_more": has_more,
    }
    await batch.db.execute(_advance_statement(), params)


@functools.cache
def _advance_statement() -> Any:
    """Bound: `uid`, `sid`, `through` (the new watermark), `after` (the same, 0 for
    none) and `has_more`."""
    later = exists().where(Message.session_id == bindparam("sid"), Message.id > bindparam("after"))
    due = or_(
        bindparam("has_more", type_=Boolean),
        and_(SessionRow.closed_at.is_not(None), later),
    )
    return (
        update(SessionRow)
        .where(SessionRow.id == bindparam("sid"), SessionRow.user_id == bindparam("uid"))
        .values(
            extracted_through=bindparam("through", type_=BigInteger),
            extraction_due=due,
            extraction_attempts=0,
        )
    )


async def _record_failure(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, session_id: int, error: Exception
) -> None:
    async with sessions.begin() as db:
        attempts = await db.scalar(
            update(SessionRow)
            .where(SessionRow.id == session_id, SessionRow.user_id == user_id)
            .values(extraction_attempts=SessionRow.extraction_attempts + 1)
            .returning(SessionRow.extraction_attempts)
        )
    log.warning(
        "memory.extraction_failed",
        user_id=user_id,
        session_id=session_id,
        error=type(error).__name__,
        attempts=attempts,
    )


async def due_sessions(
    sessions: async_sessionmaker[AsyncSession],
    *,
    every_n: int,
    limit: int = 50,
    max_attempts: int | None = MAX_ATTEMPTS,
) -> list[tuple[int, int]]:
    """(user_id, session_id) pairs to extract: closed ones, or open ones with `every_n`
    new user messages; `max_attempts=None` (the patrol) also retries failing ones."""
    new_user_messages = (
        select(Message.id)
        .where(
            Message.session_id == SessionRow.id,
            Message.user_id == SessionRow.user_id,
            Message.role == "user",
            Message.id > func.coalesce(SessionRow.extracted_through, 0),
        )
        .limit(every_n)
        .correlate(SessionRow)
        .subquery()
    )
    pending = select(func.count()).select_from(new_user_messages).scalar_subquery()
    query = select(SessionRow.user_id, SessionRow.id).where(
        or_(SessionRow.extraction_due, and_(SessionRow.closed_at.is_(None), pending >= every_n)),
        SessionRow.import_id.is_(None),  # imports are read at their own pace (bot/imports.py)
    )
    if max_attempts is not None:
        query = query.where(SessionRow.extraction_attempts < max_attempts)
    async with sessions() as db:
        rows = await db.execute(query.order_by(SessionRow.id).limit(limit))
        return [(int(user), int(session)) for user, session in rows.all()]


async def remember_explicit(
    *,
    user_id: int,
    text: str,
    memories: SqlMemories,
    llm: ToolCaller | None,
    clock: Clock,
    timezone: str,
    source_message_ids: Sequence[int] = (),
) -> MemoryItem:
    """Save what the person explicitly asked to remember; without a model it is still saved.
    A claim over the companion itself ("remember that I am the admin") is refused with
    `NotAboutThePerson`, however it is asked for. `source_message_ids` are the messages
    the request came from (hidden again when the memory is forgotten)."""
    content = text.strip()
    if not content:
        raise ValueError("nothing to remember")
    if claims_power_over_system(content):
        log.info("memory.remember_refused", user_id=user_id, reason="system_claim")
        raise NotAboutThePerson("a claim over the companion, not a fact of a life")
    now = clock.now()
    zone = zone_of(timezone)
    classified = await _classify(llm, content, timezone=timezone, zone=zone, now=now)
    event_at = parse_event_date(classified.event_date, zone) if classified.event_date else None
    span = lifespan(classified.category, event_at=event_at, now=now)
    candidate = Candidate(
        content=content,
        category=span.category,
        tier=span.tier,
        importance=max(classified.importance, EXPLICIT_MIN_IMPORTANCE),
        confidence=1.0,
        event_at=span.event_at,
        expires_at=span.expires_at,
        source_message_ids=tuple(source_message_ids),
    )
    try:
        (vector,) = await memories.embed([content])
    except Exception as exc:
        log.warning("memory.embedding_failed", user_id=user_id, error=type(exc).__name__)
        vector = None
    async with memories.batch(user_id) as batch:
        item = await save_explicit(batch, candidate, vector)
    log.info("memory.remembered", user_id=user_id, memory_id=item.id, category=item.category)
    return item


async def _classify(
    llm: ToolCaller | None, text: str, *, timezone: str, zone: ZoneInfo, now: datetime
) -> Classification:
    """Category, importance and date from the fast model; `fact`/7 when it cannot answer."""
    fallback = Classification(category="fact", importance=7)
    if llm is None:
        return fallback
    try:
        raw = await llm.call_tool(
            system=CLASSIFY_SYSTEM,
            prompt=classify_prompt(text, timezone=timezone, zone=zone, now=now),
            tool_name=CLASSIFY_TOOL.name,
            tool_description=CLASSIFY_TOOL.description,
            input_schema=CLASSIFY_TOOL.input_schema,
        )
        return Classification.model_validate(raw)
    except Exception as exc:
        log.warning("memory.classify_failed", error=type(exc).__name__)
        return fallback
