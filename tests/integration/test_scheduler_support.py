"""Helpers shared by the scheduler tests (no tests here): people with schedules, the
model's check-in answers, reading the outbox."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any

from sqlalchemy import select, update

from bot.bootstrap import Core
from bot.domain import IncomingMessage, Reply
from bot.llm import LLMRequest
from bot.timing import next_checkin
from memory.store.items import Candidate, MemoryItem
from memory.store.tables import Identity, Outreach, User
from scheduler.deps import SchedulerConfig, SchedulerDeps, deps_from
from tests.fakes.chat_llm import ScriptedLLM, prompt_text
from tests.fakes.delivery import RecordingDelivery

CONFIG = SchedulerConfig(llm_steps=True, concurrency=4, spread=timedelta(0))
"""Exact times (no per-person spread: `test_checkin_capacity.py` covers the spread)."""


def scheduler_deps(core: Core, **overrides: Any) -> SchedulerDeps:
    """The jobs' collaborators over the test core, LLM steps on."""
    return deps_from(core, dataclasses.replace(CONFIG, **overrides))


def recording(core: Core, platform: str = "console") -> RecordingDelivery:
    """A delivery port on `platform`, registered with the core's outbound."""
    delivery = RecordingDelivery(platform=platform)
    core.outbound.register(delivery)
    return delivery


@dataclass
class Drafts:
    """The model's `decide_checkin` answers, recording the prompts it saw."""

    message: str = "Morning! How are you today?"
    send: bool = True
    prompts: list[str] = field(default_factory=list)

    def __call__(self, request: LLMRequest) -> dict[str, object]:
        turns = "\n".join(t.content for t in request.turns)
        self.prompts.append(prompt_text(request, turns))
        return {"send": self.send, "message": self.message}


def drafts(llm: ScriptedLLM, **kwargs: Any) -> Drafts:
    """Install a `decide_checkin` answerer on the scripted model."""
    answer = Drafts(**kwargs)
    llm.tools["decide_checkin"] = answer
    return answer


async def add_person(
    core: Core,
    name: str = "alice",
    *,
    tz: str = "UTC",
    checkin: time | None = time(9),
    quiet: tuple[time, time] | None = (time(22), time(8)),
    schedule: bool = True,
) -> int:
    """A person reachable on the console, with a check-in scheduled from the clock's now."""
    person = await core.store.ensure_person(
        platform="console", platform_user_id=name, chat_id=f"chat-{name}", display_name=name
    )
    values: dict[str, Any] = {
        "timezone": tz,
        "checkin_time": checkin,
        "quiet_start": quiet[0] if quiet else None,
        "quiet_end": quiet[1] if quiet else None,
    }
    if schedule:
        values["next_checkin_at"] = next_checkin(core.clock.now(), tz, checkin)
    await core.store.update_person(person.id, **values)
    return person.id


async def say(core: Core, text_: str, name: str = "alice") -> Reply:
    """The person writes to the companion."""
    return await core.router.handle(
        IncomingMessage("console", name, text_, chat_id=f"chat-{name}", display_name=name)
    )


async def outreach_rows(core: Core, user_id: int | None = None) -> list[Outreach]:
    """Every outbox row (of one person), oldest first."""
    query = select(Outreach).order_by(Outreach.id)
    if user_id is not None:
        query = query.where(Outreach.user_id == user_id)
    async with core.sessions() as db:
        return list((await db.scalars(query)).all())


async def statuses(core: Core, user_id: int | None = None) -> list[tuple[str, str, str | None]]:
    """(kind, status, reason) of every outbox row, oldest first."""
    return [(r.kind, r.status, r.reason) for r in await outreach_rows(core, user_id)]


async def next_checkin_at(core: Core, user_id: int) -> datetime | None:
    """The person's scheduled next check-in."""
    async with core.sessions() as db:
        return await db.scalar(select(User.next_checkin_at).where(User.id == user_id))


async def set_unreachable(core: Core, user_id: int) -> None:
    """Every identity of the person is unreachable (they blocked the bot)."""
    async with core.sessions.begin() as db:
        await db.execute(
            update(Identity).where(Identity.user_id == user_id).values(reachable=False)
        )


async def remember_event(
    core: Core, user_id: int, content: str, event_at: datetime, **kwargs: Any
) -> MemoryItem:
    """An event memory, as extraction would store it."""
    candidate = Candidate(
        content=content,
        category="event",
        tier="active",
        importance=kwargs.pop("importance", 6),
        confidence=0.9,
        event_at=event_at,
        expires_at=event_at + timedelta(days=3),
    )
    return await core.memories.add(user_id, candidate, source="extracted", actor="extraction")
