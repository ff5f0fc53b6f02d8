"""Figures for `companion stats`: one set-based query per section, across all people.

Counts only — never any person's text. Windows are "the last 24 hours" (`day`) and
everything (`total`), measured from the `now` the caller passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Select, case, distinct, func, select, true
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import InstrumentedAttribute, aliased

from memory.store.memory_stats import MemoryFigures, memory_figures
from memory.store.tables import Memory, MemoryEvent, Message, Outreach, User
from memory.store.tables import Session as SessionRow

DAY = timedelta(days=1)
WEEK = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class Windowed:
    """A count over the last 24 hours and in total."""

    day: int
    total: int


@dataclass(frozen=True, slots=True)
class ModelTokens:
    """Tokens of stored replies by one model."""

    model: str
    input: Windowed
    output: Windowed
    cache_read: Windowed
    cache_write: Windowed


@dataclass(frozen=True, slots=True)
class Latency:
    """Seconds from a person's message to the first reply after it, over the last day."""

    samples: int
    p50: float | None
    p95: float | None


@dataclass(frozen=True, slots=True)
class Figures:
    """Everything `companion stats` prints."""

    now: datetime
    people: int
    active_day: int
    active_week: int
    messages: dict[str, Windowed]
    latency: Latency
    tokens: tuple[ModelTokens, ...]
    extraction: dict[str, Windowed]
    extraction_failing_sessions: int
    extraction_failed_attempts: int
    outreach: tuple[tuple[str, str, str, Windowed], ...]
    memories: tuple[tuple[str, str, int], ...]
    memory_use: MemoryFigures | None = None


def _counts(
    column: InstrumentedAttribute[datetime], since: datetime
) -> tuple[ColumnElement[int], ColumnElement[int]]:
    """count(*) since `since`, and count(*) overall."""
    return func.count().filter(column >= since), func.count()


async def collect_figures(sessions: async_sessionmaker[AsyncSession], now: datetime) -> Figures:
    """Read every figure at `now`."""
    day = now - DAY
    async with sessions() as db:
        people = int(await db.scalar(select(func.count(User.id))) or 0)
        active = (
            await db.execute(
                select(
                    func.count(distinct(Message.user_id)).filter(Message.created_at >= day),
                    func.count(distinct(Message.user_id)),
                ).where(Message.role == "user", Message.created_at >= now - WEEK)
            )
        ).one()
        recent, total = _counts(Message.created_at, day)
        messages = {
            str(role): Windowed(int(d), int(t))
            for role, d, t in await db.execute(
                select(Message.role, recent, total).group_by(Message.role)
            )
        }
        latency = await _latency(db, day)
        tokens = await _tokens(db, day)
        recent, total = _counts(MemoryEvent.created_at, day)
        extraction = {
            str(action): Windowed(int(d), int(t))
            for action, d, t in await db.execute(
                select(MemoryEvent.action, recent, total)
                .where(MemoryEvent.actor == "extraction")
                .group_by(MemoryEvent.action)
            )
        }
        failing = (
            await db.execute(
                select(func.count(), func.coalesce(func.sum(SessionRow.extraction_attempts), 0))
                .select_from(SessionRow)
                .where(SessionRow.extraction_attempts > 0)
            )
        ).one()
        outreach = await _outreach(db, day)
        memories = await _memories(db)
        memory_use = await memory_figures(db, day)
    return Figures(
        now=now,
        people=people,
        active_day=int(active[0]),
        active_week=int(active[1]),
        messages=messages,
        latency=latency,
        tokens=tokens,
        extraction=extraction,
        extraction_failing_sessions=int(failing[0]),
        extraction_failed_attempts=int(failing[1]),
        outreach=outreach,
        memories=memories,
        memory_use=memory_use,
    )


def _latency_query(since: datetime) -> Select[float | None, float | None, int]:
    """Answered messages of the last day joined to the first assistant message after each."""
    reply = aliased(Message)
    first_reply = (
        select(reply.created_at.label("at"))
        .where(
            reply.session_id == Message.session_id,
            reply.user_id == Message.user_id,
            reply.role == "assistant",
            reply.id > Message.id,
        )
        .order_by(reply.id)
        .limit(1)
        .lateral("first_reply")
    )
    seconds = func.extract("epoch", first_reply.c.at - Message.created_at)
    waits = (
        select(seconds.label("s"))
        .select_from(Message)
        .join(first_reply, true())
        .where(Message.role == "user", Message.status == "answered", Message.created_at >= since)
        .subquery()
    )
    return select(
        func.percentile_cont(0.5).within_group(waits.c.s),
        func.percentile_cont(0.95).within_group(waits.c.s),
        func.count(),
    ).select_from(waits)


async def _latency(db: AsyncSession, since: datetime) -> Latency:
    p50, p95, samples = (await db.execute(_latency_query(since))).one()
    return Latency(
        int(samples), None if p50 is None else float(p50), None if p95 is None else float(p95)
    )


async def _tokens(db: AsyncSession, since: datetime) -> tuple[ModelTokens, ...]:
    columns = (
        Message.input_tokens,
        Message.output_tokens,
        Message.cache_read_tokens,
        Message.cache_write_tokens,
    )
    sums = []
    for column in columns:
        sums.append(func.coalesce(func.sum(column).filter(Message.created_at >= since), 0))
        sums.append(func.coalesce(func.sum(column), 0))
    rows = await db.execute(
        select(Message.model, *sums)
        .where(Message.model.is_not(None))
        .group_by(Message.model)
        .order_by(Message.model)
    )
    result = []
    for model, *values in rows:
        pairs = [Windowed(int(values[i]), int(values[i + 1])) for i in range(0, 8, 2)]
        result.append(ModelTokens(str(model), *pairs))
    return tuple(result)


async def _outreach(
    db: AsyncSession, since: datetime
) -> tuple[tuple[str, str, str, Windowed], ...]:
    reason = func.coalesce(Outreach.reason, "")
    recent, total = _counts(Outreach.created_at, since)
    rows = await db.execute(
        select(Outreach.kind, Outreach.status, reason, recent, total)
        .group_by(Outreach.kind, Outreach.status, reason)
        .order_by(Outreach.kind, Outreach.status, reason)
    )
    return tuple(
        (str(kind), str(status), str(why), Windowed(int(d), int(t)))
        for kind, status, why, d, t in rows
    )


async def _memories(db: AsyncSession) -> tuple[tuple[str, str, int], ...]:
    state = case((Memory.valid_until.is_(None), Memory.status), else_="superseded")
    rows = await db.execute(
        select(Memory.tier, state, func.count())
        .group_by(Memory.tier, state)
        .order_by(Memory.tier, state)
    )
    return tuple((str(tier), str(status), int(count)) for tier, status, count in rows)
