"""The nightly diary: written for people who talked that day, its notes to self injected
into the next day's conversations, shown by /diary; forgotten things never in it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from bot.bootstrap import Core
from bot.domain import ButtonPress
from bot.llm import LLMRequest
from memory.store.items import Candidate
from memory.store.tables import DiaryEntry, Message
from scheduler.checkins import minute_tick
from scheduler.patrol import run_nightly
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.quoted import person_said
from tests.integration.test_scheduler_support import add_person, recording, say, scheduler_deps
from tests.support.catalog import rows_per_table

MONDAY = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
NIGHT = datetime(2026, 3, 3, 2, 5, tzinfo=UTC)  # 03:05 in Copenhagen
TUESDAY = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


class EchoDiarist:
    """Writes the diary from exactly what it was shown: one line per quoted message."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, request: LLMRequest) -> dict[str, object]:
        prompt = request.turns[0].content
        self.prompts.append(prompt)
        said = [m.text for m in person_said(prompt)]
        lines = [f"They told me: {s}" for s in said][:4] + ["A good day."] * 3
        return {
            "lines": lines[:5],
            "notes_to_self": [f"Ask about: {s}" for s in said][:4] + ["Be gentle."] * 3,
        }


async def talk_on_monday(core: Core, clock: FakeClock, *lines: str) -> int:
    clock.current = MONDAY
    alice = await add_person(core, tz="Europe/Copenhagen")
    await run_nightly(scheduler_deps(core))  # schedules the first patrol: tonight
    for line in lines:
        await say(core, line)
        clock.advance(minutes=2)
    return alice


async def entries(core: Core, user_id: int) -> list[DiaryEntry]:
    async with core.sessions() as db:
        return list(
            (await db.scalars(select(DiaryEntry).where(DiaryEntry.user_id == user_id))).all()
        )


async def test_a_diary_is_written_for_the_day_and_its_notes_go_into_the_next_day(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    diarist = EchoDiarist()
    scripted_llm.tools["write_diary"] = diarist
    alice = await talk_on_monday(core, clock, "I start the pottery class on Thursday")
    bob = await add_person(core, "bob", tz="Europe/Copenhagen")  # did not talk
    clock.current = NIGHT
    report = await run_nightly(scheduler_deps(core))
    assert report is not None and report.changes["diary"] == 1

    (entry,) = await entries(core, alice)
    assert entry.local_date == datetime(2026, 3, 2).date()
    assert entry.lines[0] == "They told me: I start the pottery class on Thursday"
    assert 3 <= len(entry.lines) <= 5 and 3 <= len(entry.notes_to_self) <= 7
    assert await entries(core, bob) == []
    assert "Monday 2 March 2026" in diarist.prompts[0]

    clock.current = TUESDAY
    await say(core, "morning!")
    prompt = scripted_llm.last_prompt_text()
    assert "Your notes to self" in prompt
    assert "Ask about: I start the pottery class on Thursday" in prompt

    shown = await say(core, "/diary")
    assert "Monday 2 March 2026" in shown.text and "pottery class" in shown.text
    assert shown.private

    clock.current = NIGHT + timedelta(days=1)
    await run_nightly(scheduler_deps(core))
    assert [e.local_date.day for e in await entries(core, alice)] == [2, 3]


async def test_forgotten_things_never_reach_the_diary_or_the_notes(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    diarist = EchoDiarist()
    scripted_llm.tools["write_diary"] = diarist
    alice = await talk_on_monday(
        core, clock, "My secret nickname is Bubbles", "We had pasta with Anna for lunch"
    )
    async with core.sessions() as db:
        secret = await db.scalar(select(Message.id).where(Message.content.like("%Bubbles%")))
    assert secret is not None
    await core.memories.add(
        alice,
        Candidate(
            "Their secret nickname is Bubbles",
            "identity",
            "core",
            7,
            0.9,
            source_message_ids=(secret,),
        ),
        source="extracted",
        actor="extraction",
    )
    reply = await say(core, "/forget Bubbles")
    assert reply.text.startswith("Forgotten"), reply.text

    clock.current = NIGHT
    await run_nightly(scheduler_deps(core))
    (entry,) = await entries(core, alice)
    written = "\n".join([*entry.lines, *entry.notes_to_self])
    assert "pasta with Anna" in written
    assert "Bubbles" not in written and "Bubbles" not in diarist.prompts[0]


async def test_notes_are_held_back_once_something_is_forgotten_after_they_were_written(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.tools["write_diary"] = EchoDiarist()
    alice = await talk_on_monday(core, clock, "We had pasta with Anna for lunch")
    async with core.sessions() as db:
        source = await db.scalar(select(Message.id).where(Message.content.like("%pasta%")))
    assert source is not None
    await core.memories.add(
        alice,
        Candidate("Had pasta with Anna", "fact", "core", 5, 0.9, source_message_ids=(source,)),
        source="extracted",
        actor="extraction",
    )
    clock.current = NIGHT
    await run_nightly(scheduler_deps(core))

    clock.current = TUESDAY
    reply = await say(core, "/forget pasta")
    assert reply.text.startswith("Forgotten"), reply.text
    await say(core, "hello")
    assert "Your notes to self" not in scripted_llm.last_prompt_text()
    shown = await say(core, "/diary")
    assert "pasta" not in shown.text and "something you asked me to forget" in shown.text


async def test_export_and_erase_cover_the_diary_and_the_outbox(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.tools["write_diary"] = EchoDiarist()
    scripted_llm.tools["decide_checkin"] = lambda request: {"send": True, "message": "Hi!"}
    recording(core)
    alice = await talk_on_monday(core, clock, "We had pasta with Anna for lunch")
    clock.current = NIGHT
    await run_nightly(scheduler_deps(core))
    clock.current = datetime(2026, 3, 3, 8, 0, 30, tzinfo=UTC)  # 09:00 in Copenhagen
    await minute_tick(scheduler_deps(core))

    exported = await say(core, "/export")
    assert exported.document is not None
    data = json.loads(exported.document.content)
    assert data["diary_entries"][0]["local_date"] == "2026-03-02"
    assert [(r["kind"], r["status"]) for r in data["outreach"]] == [("checkin", "sent")]

    confirm = await say(core, "/forget all")
    assert "1 diary entries" in confirm.text and "1 check-ins I sent" in confirm.text
    button = next(b for row in confirm.buttons for b in row if b.label.startswith("Yes"))
    await core.router.press(ButtonPress("console", "alice", button.action, chat_id="chat-alice"))
    assert {t: n for t, n in (await rows_per_table(core.sessions, alice)).items() if n} == {}
