"""Forgetting really forgets, on real PostgreSQL: a forgotten memory goes with every
earlier version of it and the words it came from; restoring brings them all back; and
when the 30-day trash is purged no row of the person holds the forgotten words any more
(every column of every table searched), while everyone else's rows stay as they were."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from bot.bootstrap import Core
from memory.store.tables import Memory, Message, Outreach, Thread
from scheduler.checkins import minute_tick
from scheduler.patrol import run_nightly
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, text
from tests.fakes.extractor import RuleExtractor
from tests.integration.test_scheduler_diary import EchoDiarist
from tests.integration.test_scheduler_support import (
    add_person,
    drafts,
    recording,
    remember_event,
    say,
    scheduler_deps,
)
from tests.support.catalog import rows_mentioning, user_id_of
from tests.support.commands import labels, press, run

MONDAY = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
NIGHT = datetime(2026, 3, 3, 2, 5, tzinfo=UTC)  # 03:05 in Copenhagen
TUESDAY = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
SECRET = "zanzibar"  # its own stem, so a search vector holding it would match too


async def extract_now(core: Core, clock: FakeClock) -> None:
    """Let the session go idle and run extraction, as the sweep does."""
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))


async def a_plan_that_changed(core: Core, clock: FakeClock, llm: ScriptedLLM) -> tuple[int, int]:
    """Alice's plan in two versions (m2 superseding m1), each from its own message, with
    the companion's echo, a diary entry quoting them; Bob talks about Zanzibar too."""
    extractor = RuleExtractor()
    extractor.add("in May", content="The person is moving to Zanzibar in May")
    extractor.add("in June", content="The person is moving to Zanzibar in June", supersedes="m1")
    llm.tools["record_memories"] = extractor
    llm.tools["write_diary"] = EchoDiarist()
    clock.current = MONDAY
    alice = await add_person(core, tz="Europe/Copenhagen", checkin=None)
    bob = await add_person(core, "bob", tz="Europe/Copenhagen", checkin=None)
    await run_nightly(scheduler_deps(core))  # schedules tonight's patrol
    llm.script.append(text("Zanzibar in May, how exciting!"))
    await say(core, "I am moving to Zanzibar in May")
    await extract_now(core, clock)
    await say(core, "Change of plans: Zanzibar in June")
    await say(core, "Zanzibar is where I dream of living", "bob")
    await extract_now(core, clock)
    history = await core.memories.history(alice, 2)
    assert [(v.label, v.live) for v in history.versions] == [("m1", False), ("m2", True)]
    clock.current = NIGHT
    await run_nightly(scheduler_deps(core))  # the diary quotes Monday's messages
    return alice, bob


async def test_forgetting_a_memory_forgets_its_earlier_versions_and_their_words(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    alice, _bob = await a_plan_that_changed(core, clock, scripted_llm)
    clock.current = TUESDAY
    assert "moving to Zanzibar" in (await run(core, "/memory m2")).text
    forgotten = await run(core, "/forget m2")
    assert forgotten.text.startswith("Forgotten"), forgotten.text

    await say(core, "when am I moving again?")  # recall would find the move in May
    assert SECRET not in scripted_llm.last_prompt_text().lower()  # not May, not June
    trash = await run(core, "/memory trash")
    assert "m2 · The person is moving to Zanzibar in June" in trash.text
    assert "m1" not in trash.text  # the earlier version is forgotten with it, not apart
    async with core.sessions() as db:
        statuses = (await db.scalars(select(Memory.status).where(Memory.user_id == alice))).all()
    assert list(statuses) == ["forgotten", "forgotten"]

    exported = json.loads((await run(core, "/export")).document.content)  # type: ignore[union-attr]
    hidden = [m for m in exported["messages"] if m["status"] == "forgotten"]
    assert len(hidden) == 4 and all(m["content"] is None for m in hidden)  # 2 said, 2 replies
    assert all(SECRET not in json.dumps(m).lower() for m in exported["messages"])
    (diary,) = exported["diary_entries"]
    assert diary["withdrawn"] and diary["lines"] == [] and diary["notes_to_self"] == []


async def test_restoring_brings_back_every_version_and_its_words(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    alice, _bob = await a_plan_that_changed(core, clock, scripted_llm)
    clock.current = TUESDAY
    forgotten = await run(core, "/forget m2")
    undone = await press(core, forgotten, "↩ Undo")
    assert "is back as it was" in undone.text
    history = await core.memories.history(alice, 2)
    assert [(v.label, v.status, v.live) for v in history.versions] == [
        ("m1", "active", False),
        ("m2", "active", True),
    ]
    await say(core, "where am I moving?")
    assert "Zanzibar in May" in scripted_llm.last_prompt_text()  # the words are back

    await run(core, "/forget m2")
    restored = await press(core, await run(core, "/memory trash"), "♻ Restore m2")
    assert "Restored" in restored.text
    assert [v.status for v in (await core.memories.history(alice, 2)).versions] == [
        "active",
        "active",
    ]


async def test_after_the_trash_is_purged_no_row_of_the_person_holds_the_forgotten_words(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    alice, bob = await a_plan_that_changed(core, clock, scripted_llm)
    bobs_before = await rows_mentioning(core.sessions, SECRET, user_id=bob)
    clock.current = TUESDAY
    await run(core, "/forget m2")
    assert await rows_mentioning(core.sessions, SECRET, user_id=alice)  # still in the trash

    clock.current = NIGHT + timedelta(days=29)
    report = await run_nightly(scheduler_deps(core))
    assert report is not None and report.changes["purge_trash"] == 0  # not 30 days yet
    clock.current = NIGHT + timedelta(days=31)
    report = await run_nightly(scheduler_deps(core))
    assert report is not None and report.changes["purge_trash"] == 2

    assert await rows_mentioning(core.sessions, SECRET, user_id=alice) == {}
    async with core.sessions() as db:
        erased = (
            await db.execute(
                select(Message.content, Message.embedding).where(
                    Message.user_id == alice, Message.status == "forgotten"
                )
            )
        ).all()
    assert len(erased) == 4 and all(row == ("", None) for row in erased)
    export = (await run(core, "/export")).document
    assert export is not None and SECRET not in export.content.decode().lower()
    assert "(removed" in (await run(core, "/diary")).text
    assert await rows_mentioning(core.sessions, SECRET, user_id=bob) == bobs_before != {}


async def test_the_repository_purge_also_erases_the_words_and_follow_ups(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    recording(core)
    drafts(scripted_llm, message="How did the Zanzibar interview go?")
    alice = await add_person(core, checkin=None)
    event = await remember_event(
        core, alice, "Interview with Zanzibar Shipping", datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    )
    clock.current = datetime(2026, 3, 2, 16, 1, tzinfo=UTC)
    await minute_tick(scheduler_deps(core))  # the follow-up is sent and logged
    assert len(await rows_mentioning(core.sessions, "Zanzibar interview", user_id=alice)) == 2

    reply = await run(core, f"/forget {event.label}")
    assert labels(reply) == ["↩ Undo"]
    await say(core, "hi")
    assert SECRET not in scripted_llm.last_prompt_text().lower()  # nor the follow-up

    assert await core.memories.purge_trash(clock.now() + timedelta(days=31)) == 1
    assert await rows_mentioning(core.sessions, SECRET, user_id=alice) == {}
    async with core.sessions() as db:
        (outreach,) = (await db.scalars(select(Outreach))).all()
    assert outreach.text is None and outreach.status == "sent"  # the record stays, not the words
    assert outreach.memory_id is None  # nor its link to the memory, which is gone


async def test_the_purge_erases_the_title_of_the_thread_a_forgotten_memory_was_filed_under(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    extractor = RuleExtractor()
    extractor.add(
        "interview",
        content="The person has a job interview at Zanzibar Shipping",
        category="event",
        tier="active",
        thread="Interview at Zanzibar Shipping",
    )
    scripted_llm.tools["record_memories"] = extractor
    clock.current = MONDAY
    await say(core, "I have a job interview at Zanzibar Shipping on Friday")
    await extract_now(core, clock)
    alice = await user_id_of(core.sessions, "alice")
    async with core.sessions() as db:
        (title,) = (await db.scalars(select(Thread.title).where(Thread.user_id == alice))).all()
    assert SECRET in title.lower()

    assert (await run(core, "/forget m1")).text.startswith("Forgotten")
    exported = json.loads((await run(core, "/export")).document.content)  # type: ignore[union-attr]
    assert [(t["title"], t["status"]) for t in exported["threads"]] == [(None, "withdrawn")]
    assert await core.memories.purge_trash(clock.now() + timedelta(days=31)) == 1
    assert await rows_mentioning(core.sessions, SECRET, user_id=alice) == {}
    async with core.sessions() as db:
        (thread,) = (await db.scalars(select(Thread).where(Thread.user_id == alice))).all()
    assert (thread.status, thread.title) == ("withdrawn", "")
