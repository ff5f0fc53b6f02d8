"""Figures of the memory in conversation prompts for `companion stats`, read from what
each reply recorded (`messages.memory_tokens`, `memory_cut`, `recalled`, `degraded`) and
from the memory events of unsure items. Counts only, across all people."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.tables import Memory, MemoryEvent, Message


def _unsure_outcomes() -> dict[str, ColumnElement[bool]]:
    """Which memory events tell what became of an unsure item, as the life cycle records
    them: the daily question (`ask`), an affirmation of an item that was unsure, and a
    forget of an unsure item (✗, or forgotten any other way)."""
    return {
        "asked": MemoryEvent.action == "ask",
        "confirmed": and_(
            MemoryEvent.action == "affirm", MemoryEvent.details["was_unsure"].as_boolean()
        ),
        "rejected": and_(MemoryEvent.action == "forget", Memory.unsure.is_(True)),
    }


@dataclass(frozen=True, slots=True)
class Averaged:
    """A mean over the last 24 hours and over everything (None without samples)."""

    day: float | None
    total: float | None


@dataclass(frozen=True, slots=True)
class MemoryFigures:
    """The memory of conversation prompts: how many prompts carried it, their mean memory
    tokens and recalled items, how often the budget cut the block, the degraded turns by
    reason, and the unsure items by outcome; each as (last 24 hours, total)."""

    prompts: tuple[int, int]
    tokens: Averaged
    recalled: Averaged
    cut: tuple[int, int]
    degraded: tuple[tuple[str, int, int], ...]
    unsure: tuple[tuple[str, int, int], ...]


async def memory_figures(db: AsyncSession, since: datetime) -> MemoryFigures:
    """Read the figures; the 24-hour window starts at `since`."""
    recent = Message.created_at >= since
    prompts, prompts_day, tokens, tokens_day, recalled, recalled_day, cut, cut_day = (
        await db.execute(
            select(
                func.count(),
                func.count().filter(recent),
                func.avg(Message.memory_tokens),
                func.avg(Message.memory_tokens).filter(recent),
                func.avg(Message.recalled),
                func.avg(Message.recalled).filter(recent),
                func.count().filter(Message.memory_cut.is_(True)),
                func.count().filter(Message.memory_cut.is_(True), recent),
            ).where(Message.role == "assistant", Message.memory_tokens.is_not(None))
        )
    ).one()
    degraded = await db.execute(
        select(Message.degraded, func.count().filter(recent), func.count())
        .where(Message.role == "assistant", Message.degraded.is_not(None))
        .group_by(Message.degraded)
        .order_by(Message.degraded)
    )
    outcomes = _unsure_outcomes()
    counted = (
        await db.execute(
            select(
                *(
                    column
                    for condition in outcomes.values()
                    for column in (
                        func.count().filter(condition, MemoryEvent.created_at >= since),
                        func.count().filter(condition),
                    )
                )
            )
            .select_from(MemoryEvent)
            .outerjoin(Memory, Memory.id == MemoryEvent.memory_id)
            .where(MemoryEvent.action.in_(["ask", "affirm", "forget"]))
        )
    ).one()
    return MemoryFigures(
        prompts=(int(prompts_day), int(prompts)),
        tokens=Averaged(_mean(tokens_day), _mean(tokens)),
        recalled=Averaged(_mean(recalled_day), _mean(recalled)),
        cut=(int(cut_day), int(cut)),
        degraded=tuple((str(reason), int(d), int(t)) for reason, d, t in degraded),
        unsure=tuple(
            (outcome, int(counted[2 * i]), int(counted[2 * i + 1]))
            for i, outcome in enumerate(outcomes)
        ),
    )


def _mean(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]
