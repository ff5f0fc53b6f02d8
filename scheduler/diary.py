"""The nightly diary: for each person who talked on their local yesterday, the fast model
writes a few lines in the companion's voice and notes to self for the next day.

Only that day's visible messages and live memories go in, so what the person asked to
forget (hidden messages, forgotten memories) never reaches a diary entry or a note.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import structlog

from memory.local_time import day_span, zone_of
from memory.store.diary import day_messages, save_entry
from memory.store.diary_days import LocalDay, talked_without_entry
from scheduler.deps import SchedulerDeps
from scheduler.prompts import DIARY_SYSTEM, DIARY_TOOL, DiaryAnswer, diary_prompt

log = structlog.get_logger(__name__)

MEMORIES_IN_PROMPT = 30


@dataclass(frozen=True, slots=True)
class DiaryDay:
    """A person's local day to write about, as a UTC interval."""

    user_id: int
    timezone: str
    day: date
    start: datetime
    end: datetime


def day_bounds(user_id: int, tz_name: str, now: datetime) -> DiaryDay:
    """The person's local yesterday (the day that just ended at their night)."""
    tz = zone_of(tz_name)
    day = now.astimezone(tz).date() - timedelta(days=1)
    start, end = day_span(day, tz)
    return DiaryDay(user_id, tz_name, day, start, end)


async def days_to_write(
    deps: SchedulerDeps, people: Sequence[tuple[int, str]], now: datetime
) -> list[DiaryDay]:
    """Of (id, timezone) people, those who had a conversation on their local yesterday
    and have no entry for it yet (one query for the batch)."""
    days = {uid: day_bounds(uid, tz, now) for uid, tz in people}
    local = [LocalDay(d.user_id, d.day, d.start, d.end) for d in days.values()]
    return [days[user_id] for user_id in await talked_without_entry(deps.sessions, local)]


async def write_entry(deps: SchedulerDeps, day: DiaryDay) -> bool:
    """Write one person's entry for the day; False when there was nothing to write about
    (no visible message of theirs) or the model could not answer."""
    messages = await day_messages(deps.sessions, user_id=day.user_id, start=day.start, end=day.end)
    if not any(m.role == "user" for m in messages):
        return False
    memories = await deps.memories.live(day.user_id, limit=MEMORIES_IN_PROMPT)
    prompt = diary_prompt(
        messages, [m.content for m in memories], zone_of(day.timezone), f"{day.day:%A %-d %B %Y}"
    )
    try:
        raw = await deps.tool_caller.call_tool(
            system=DIARY_SYSTEM,
            prompt=prompt,
            tool_name=DIARY_TOOL.name,
            tool_description=DIARY_TOOL.description,
            input_schema=DIARY_TOOL.input_schema,
        )
        answer = DiaryAnswer.model_validate(raw)
    except Exception as exc:
        log.warning("diary.failed", user_id=day.user_id, error=type(exc).__name__)
        return False
    return await save_entry(
        deps.sessions,
        user_id=day.user_id,
        local_date=day.day,
        lines=answer.lines,
        notes_to_self=answer.notes_to_self,
        source_message_ids=[m.id for m in messages],
        now=deps.clock.now(),
    )


async def write_diaries(
    deps: SchedulerDeps, people: Sequence[tuple[int, str]], now: datetime
) -> int:
    """Entries for everyone in the batch who talked yesterday; a few at a time."""
    gate = asyncio.Semaphore(deps.config.concurrency)

    async def one(day: DiaryDay) -> bool:
        async with gate:
            return await write_entry(deps, day)

    written = await asyncio.gather(*(one(d) for d in await days_to_write(deps, people, now)))
    return sum(written)
