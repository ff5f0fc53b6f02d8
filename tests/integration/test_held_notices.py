"""Nothing the companion says on its own goes out in quiet hours, while paused, or before
the timezone is known: memory notices are held in PostgreSQL, released once by the real
scheduler tick when the window opens (merged, with Undo buttons made then), and dropped
when stale or when nothing in them is live any more."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.bootstrap import Core
from bot.commands.base import CommandDeps
from bot.domain import Button, Reply
from bot.notice_window import NoticeWindow
from bot.outbound import Outbound
from memory.store.actions import SqlActionStore
from memory.store.conversations import SqlConversationStore
from memory.store.database import create_engine, session_factory
from memory.store.tables import HeldNotice, Memory
from scheduler.checkins import minute_tick
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.delivery import RecordingDelivery
from tests.fakes.extractor import RuleExtractor
from tests.integration.test_scheduler_support import scheduler_deps
from tests.support.catalog import user_id_of
from tests.support.commands import labels, press, run

BERLIN = "Europe/Berlin"
IDLE = timedelta(minutes=30)


def extractor_on(llm: ScriptedLLM) -> RuleExtractor:
    extractor = RuleExtractor()
    extractor.add("sister", content="The person's sister is Maja", category="relationship")
    extractor.add("Aarhus", content="The person grew up in Aarhus", category="identity")
    extractor.add("cello", content="The person plays the cello", category="preference")
    llm.tools["record_memories"] = extractor
    return extractor


async def talk_then_idle(core: Core, clock: FakeClock, line: str) -> None:
    """Alice says `line`; an hour later the idle session is extracted."""
    await run(core, line)
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=IDLE)


async def held(core: Core) -> list[tuple[str, str | None]]:
    async with core.sessions() as db:
        rows = await db.execute(
            select(HeldNotice.status, HeldNotice.reason).order_by(HeldNotice.id)
        )
        return [(status, reason) for status, reason in rows.all()]


async def test_a_notice_at_2330_waits_for_the_morning_merged_with_the_next_one(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor_on(scripted_llm)
    await run(core, f"/timezone {BERLIN}")
    deps = scheduler_deps(core)
    clock.current = datetime(2026, 3, 2, 22, 30, tzinfo=UTC)  # 23:30 in Berlin
    await talk_then_idle(core, clock, "my sister Maja is visiting")
    await talk_then_idle(core, clock, "we grew up in Aarhus, you know")
    assert delivery.sent == []
    assert await held(core) == [("held", None), ("held", None)]

    clock.current = datetime(2026, 3, 3, 6, 59, tzinfo=UTC)  # 07:59, still quiet
    await minute_tick(deps)
    assert delivery.sent == []

    clock.current = datetime(2026, 3, 3, 7, 0, 30, tzinfo=UTC)  # 08:00:30, quiet is over
    outcomes = await minute_tick(deps)
    assert outcomes["notice_sent"] == 2
    ((recipient, notice),) = delivery.sent
    assert recipient.chat_id == "chat-alice" and notice.private
    assert notice.text.startswith("While you were away I noted:")
    assert "Maja" in notice.text and "Aarhus" in notice.text
    assert labels(notice) == ["↩ Undo m1", "↩ Undo m2"]
    assert await held(core) == [("sent", None), ("sent", None)]

    clock.advance(minutes=1)
    await minute_tick(deps)
    assert len(delivery.sent) == 1  # released once

    undone = await press(core, notice, "↩ Undo m1")
    assert "let go of “The person's sister is Maja” (m1)" in undone.text
    async with core.sessions() as db:
        statuses = dict((await db.execute(select(Memory.short_id, Memory.status))).all())
    assert statuses == {1: "forgotten", 2: "active"}


async def test_in_the_window_a_notice_goes_out_at_once(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor_on(scripted_llm)
    await run(core, f"/timezone {BERLIN}")  # 10:00 in Berlin
    await talk_then_idle(core, clock, "my sister Maja is visiting")
    ((_, notice),) = delivery.sent
    assert notice.text.startswith("I noted:") and labels(notice) == ["↩ Undo m1"]
    assert await held(core) == []


async def test_a_paused_person_gets_no_notice_and_a_stale_one_is_dropped(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor_on(scripted_llm)
    deps = scheduler_deps(core)
    await run(core, f"/timezone {BERLIN}")
    await run(core, "/pause")
    await talk_then_idle(core, clock, "my sister Maja is visiting")
    for _ in range(3):  # daytime ticks while paused: nothing
        clock.advance(hours=4)
        await minute_tick(deps)
    assert delivery.sent == [] and await held(core) == [("held", None)]

    clock.advance(hours=30)  # older than 36 hours now
    await run(core, "/resume")
    await minute_tick(deps)
    assert delivery.sent == []
    assert await held(core) == [("dropped", "stale")]


async def test_a_paused_notice_goes_out_after_resume_when_still_fresh(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor_on(scripted_llm)
    deps = scheduler_deps(core)
    await run(core, f"/timezone {BERLIN}")
    await run(core, "/pause")
    await talk_then_idle(core, clock, "I play the cello")
    await minute_tick(deps)
    assert delivery.sent == []
    await run(core, "/resume")
    await minute_tick(deps)
    ((_, notice),) = delivery.sent
    assert "cello" in notice.text and labels(notice) == ["↩ Undo m1"]


async def test_a_held_notice_whose_memories_were_undone_is_dropped(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor_on(scripted_llm)
    await run(core, f"/timezone {BERLIN}")
    clock.current = datetime(2026, 3, 2, 22, 30, tzinfo=UTC)
    await talk_then_idle(core, clock, "I play the cello")
    assert "m1" in (await run(core, "/forget m1")).text
    clock.current = datetime(2026, 3, 3, 7, 1, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    assert delivery.sent == []
    assert await held(core) == [("dropped", "gone")]


async def test_with_no_timezone_a_notice_waits_until_it_is_known(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor_on(scripted_llm)
    deps = scheduler_deps(core)
    await talk_then_idle(core, clock, "I play the cello")
    await minute_tick(deps)
    assert delivery.sent == [] and await held(core) == [("held", None)]
    await run(core, "/timezone Lisbon")  # 10:00 in Lisbon
    await minute_tick(deps)
    ((_, notice),) = delivery.sent
    assert notice.text.startswith("While you were away I noted:") and "cello" in notice.text


async def test_another_message_held_keeps_its_text_and_buttons(
    core: Core, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    await run(core, f"/timezone {BERLIN}")
    alice = await core.store.person(await user_id_of(core.sessions, "alice"))
    assert alice is not None
    clock.current = datetime(2026, 3, 2, 23, 0, tzinfo=UTC)  # midnight in Berlin
    question = Reply("Update it?", ((Button("Yes", "a:yes"), Button("No", "a:no")),))
    assert await core.memory.send_notice(alice, reply=question) == "held"
    clock.current = datetime(2026, 3, 3, 7, 0, 30, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))
    ((_, sent),) = delivery.sent
    assert sent.text == "Update it?" and labels(sent) == ["Yes", "No"] and sent.private


@pytest.fixture
async def second_process(database_url: str) -> AsyncIterator[AsyncEngine]:
    """Another process's connection pool to the same database."""
    engine = create_engine(database_url, pool_size=5)
    yield engine
    await engine.dispose()


async def test_two_processes_release_each_held_notice_once(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock, second_process: AsyncEngine
) -> None:
    first_delivery, second_delivery = RecordingDelivery(), RecordingDelivery()
    core.outbound.register(first_delivery)
    extractor_on(scripted_llm)
    clock.current = datetime(2026, 3, 2, 23, 0, tzinfo=UTC)
    for name in [f"p{i}" for i in range(12)]:
        await run(core, f"/timezone {BERLIN}", user=name)
        await run(core, "I play the cello", user=name)
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=IDLE)
    assert first_delivery.sent == [] and len(await held(core)) == 12

    sessions = session_factory(second_process)
    outbound = Outbound(sessions)
    outbound.register(second_delivery)
    commands = CommandDeps(
        sessions=sessions,
        store=SqlConversationStore(sessions),
        memories=core.memories,
        actions=SqlActionStore(sessions),
        clock=clock,
        tool_caller=None,
    )
    second = NoticeWindow(sessions=sessions, commands=commands, outbound=outbound, clock=clock)
    clock.current = datetime(2026, 3, 3, 7, 0, 30, tzinfo=UTC)
    await asyncio.gather(
        core.memory.notices.release(limit=3),
        second.release(limit=3),
        core.memory.notices.release(limit=5),
    )
    sent = [r.user_id for r, _ in first_delivery.sent + second_delivery.sent]
    assert len(sent) == 12 and len(set(sent)) == 12
    assert {status for status, _ in await held(core)} == {"sent"}
