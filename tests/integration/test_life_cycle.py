"""The memory life cycle through the whole core on real PostgreSQL and a moved clock:
what fades leaves the standing block and comes back from recall marked as over;
affirmation (restating, ✓, the `confirm_memory` tool) firms a memory and brings it back;
retrieval alone does not; unsure memories are kept, listed, asked about once a day,
confirmed or rejected; dead memories are searchable, then purged after the retention.
Every assertion about prompts reads what the chat model was actually sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, text, update

from bot.bootstrap import Core
from bot.llm import LLMRequest
from memory.store.items import Candidate, MemoryItem
from memory.store.tables import Memory, MemoryEvent, User
from memory.store.tables import Session as SessionRow
from scheduler.patrol import run_nightly
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, tool_call
from tests.fakes.chat_llm import text as reply_text
from tests.fakes.delivery import RecordingDelivery
from tests.fakes.extractor import RuleExtractor
from tests.integration.test_scheduler_support import scheduler_deps
from tests.support.catalog import user_id_of
from tests.support.commands import press, run

MONDAY = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RECALLED = "Possibly relevant to this message"
GOING_ON = "Going on now and coming up"


async def alice(core: Core, clock: FakeClock) -> int:
    """Alice, in UTC (her window is open at 09:00), with nothing remembered yet."""
    clock.current = MONDAY
    await run(core, "/timezone UTC")
    return await user_id_of(core.sessions, "alice")


async def add(
    core: Core,
    user_id: int,
    content: str,
    *,
    category: str = "fact",
    importance: float = 6,
    confidence: float = 0.9,
    **columns: Any,
) -> MemoryItem:
    """A memory as extraction stores it, then `columns` as they are after a while."""
    tier = "active" if category in {"thread", "goal", "emotion", "event"} else "core"
    expires = columns.pop("expires_at", None)
    candidate = Candidate(content, category, tier, importance, confidence, expires_at=expires)
    item = await core.memories.add(user_id, candidate, source="extracted", actor="extraction")
    if columns:
        async with core.sessions.begin() as db:
            await db.execute(update(Memory).where(Memory.id == item.id).values(**columns))
    return item


async def row(core: Core, memory_id: int) -> Memory:
    async with core.sessions() as db:
        return await db.get_one(Memory, memory_id)


async def affirm_events(core: Core, memory_id: int) -> list[str]:
    async with core.sessions() as db:
        found = await db.scalars(
            select(MemoryEvent.details["via"].astext)
            .where(MemoryEvent.memory_id == memory_id, MemoryEvent.action == "affirm")
            .order_by(MemoryEvent.id)
        )
        return list(found)


def last_chat(llm: ScriptedLLM) -> LLMRequest:
    return llm.chat_requests[-1]


def sections(block: str) -> dict[str, list[str]]:
    """A rendered memory block as {section title: its lines}."""
    found: dict[str, list[str]] = {}
    for part in block.split("\n## ")[1:]:
        title, *lines = part.splitlines()
        found[title] = [line.removeprefix("- ") for line in lines if line.startswith("- ")]
    return found


async def say(core: Core, llm: ScriptedLLM, words: str) -> tuple[str, dict[str, list[str]]]:
    """Alice says `words`: the standing block the model got and this turn's sections."""
    await run(core, words)
    await core.background.drain()
    request = last_chat(llm)
    return request.standing_system, sections(request.turn_context)


async def extract_now(core: Core, clock: FakeClock) -> None:
    """An hour passes: the session closes and is extracted."""
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))


async def patrol(core: Core, user_id: int, **config: Any) -> None:
    """Alice's nightly patrol, due now (it looks back over the last day)."""
    async with core.sessions.begin() as db:
        await db.execute(
            text("UPDATE users SET next_patrol_at = :due WHERE id = :id"),
            {"due": core.clock.now() - timedelta(minutes=1), "id": user_id},
        )
    await run_nightly(scheduler_deps(core, llm_steps=False, **config))


async def test_an_emotion_said_ten_days_ago_leaves_the_block_and_comes_back_as_past(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    user = await alice(core, clock)
    await add(
        core,
        user,
        "The person feels anxious about Friday's exam",
        category="emotion",
        expires_at=MONDAY + timedelta(days=3),
    )
    _, now = await say(core, scripted_llm, "morning")
    assert now[GOING_ON] == ["The person feels anxious about Friday's exam"]

    clock.advance(days=10)
    await patrol(core, user)  # expired: dying
    standing, later = await say(core, scripted_llm, "the exam results came out today")
    assert "anxious" not in standing and GOING_ON not in later
    assert later[RECALLED][0] == (
        "The person feels anxious about Friday's exam (over: said 10 days ago, ended 5 Mar)"
    )


async def test_a_restated_fact_firms_up_and_its_decay_restarts(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    user = await alice(core, clock)
    bakery = await add(
        core,
        user,
        "The person works at the bakery on Elm Street",
        confidence=0.75,
        status="dying",
        recall_seq=-60,
    )
    hiking = await add(
        core,
        user,
        "The person is planning a hiking trip to Skye",
        category="thread",
        confidence=0.8,
        status="dying",
        expires_at=MONDAY - timedelta(days=2),
    )
    standing, _ = await say(core, scripted_llm, "busy week")
    assert "bakery" not in standing  # faded: recall-only
    extractor = RuleExtractor()
    extractor.add("Elm", content="The person still works at the Elm Street bakery", same_as="m1")
    extractor.add(
        "Skye",
        content="The person is planning a hiking trip to Skye",
        category="thread",
        tier="active",
    )
    scripted_llm.tools["record_memories"] = extractor
    await run(core, "still at the bakery on Elm, and still planning Skye")
    await extract_now(core, clock)

    firmed = await row(core, bakery.id)
    assert (firmed.confidence, firmed.mention_count, firmed.status) == (0.9, 2, "active")
    assert firmed.last_confirmed_at == clock.now()
    async with core.sessions() as db:
        seq = await db.scalar(select(User.session_seq).where(User.id == user))
    assert firmed.recall_seq == seq  # its decay counts from now
    assert await affirm_events(core, bakery.id) == ["restated"]
    trip = await row(core, hiking.id)
    assert trip.status == "active" and trip.expires_at == clock.now() + timedelta(days=21)
    assert trip.confidence == 0.95 and trip.mention_count == 2
    shown = (await run(core, "/memory m1")).text
    assert shown.endswith("I noticed, 2 Mar (90% sure) · confirmed 2 Mar")

    clock.advance(hours=2)
    standing, now = await say(core, scripted_llm, "new session, hello")
    assert "The person works at the bakery on Elm Street" in sections(standing)["About them"]
    assert now[GOING_ON] == ["The person is planning a hiking trip to Skye"]


async def test_retrieval_alone_never_brings_a_faded_memory_back_but_affirmation_does(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    user = await alice(core, clock)
    chess = await add(core, user, "The person plays chess on Sundays", importance=2.1)
    clock.advance(hours=1)  # a later conversation: it is in the standing block
    standing, _ = await say(core, scripted_llm, "hello")
    assert "chess" in standing
    async with core.sessions.begin() as db:  # three more conversations since
        for hours in (20, 12, 4):
            start = clock.now() - timedelta(hours=hours)
            db.add(
                SessionRow(user_id=user, started_at=start, last_message_at=start, closed_at=start)
            )
    clock.advance(hours=1)
    await patrol(core, user)
    assert (await row(core, chess.id)).status == "dying"

    clock.advance(hours=1)
    standing, now = await say(core, scripted_llm, "do I still play chess on Sundays?")
    assert "chess" not in standing
    assert now[RECALLED][0] == (
        "The person plays chess on Sundays (may be out of date: said today, not confirmed since)"
    )
    assert (await row(core, chess.id)).recall_count == 1
    clock.advance(days=1)
    await patrol(core, user)  # recalled: its clock restarts, but it stays recall-only
    assert (await row(core, chess.id)).status == "dying"
    standing, _ = await say(core, scripted_llm, "anyway, how are you")
    assert "chess" not in standing

    scripted_llm.script += [
        tool_call("confirm_memory", {"text": "The person swims at the club on weekdays"}),
        reply_text("Noted."),
        tool_call("confirm_memory", {"text": "The person plays chess on Sundays"}),
        reply_text("Good to hear."),
    ]
    await run(core, "I'm off to the club")
    assert (await row(core, chess.id)).status == "dying"  # no memory says that: nothing done
    assert "Nothing was confirmed" in str(last_chat(scripted_llm).tool_exchange)
    await run(core, "yes, chess every Sunday still")
    firmed = await row(core, chess.id)
    assert (firmed.status, firmed.confidence, firmed.mention_count) == ("active", 1.0, 2)
    assert await affirm_events(core, chess.id) == ["tool"]
    clock.advance(hours=2)
    standing, _ = await say(core, scripted_llm, "hi again")
    assert "The person plays chess on Sundays" in sections(standing)["About them"]


async def test_an_unsure_memory_is_asked_about_once_a_day_then_confirmed_and_standing(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    user = await alice(core, clock)
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = RuleExtractor()
    extractor.add("cello", content="The person may be taking up the cello", confidence=0.55)
    extractor.add("violin", content="The person might sell their old violin", confidence=0.6)
    extractor.add("harp", content="The person may have seen a harp once", confidence=0.39)
    scripted_llm.tools["record_memories"] = extractor
    await run(core, "thinking about the cello, and I saw a harp")
    await extract_now(core, clock)

    ((_, question),) = delivery.sent  # no "I noted" notice: only the question
    assert question.text.startswith(
        "Did I get this right? I noted “The person may be taking up the cello” (m1)"
    )
    listing = (await run(core, "/memory")).text
    assert "m1 · The person may be taking up the cello · I noticed, 2 Mar · not sure (55%)" in (
        listing
    )
    assert "harp" not in listing  # under the floor: dropped
    clock.advance(hours=1)
    standing, now = await say(core, scripted_llm, "what about music lessons for the cello?")
    assert "cello" not in standing
    assert now[RECALLED][0].startswith(
        "The person may be taking up the cello (unconfirmed, 55% sure, said today)"
    )

    await run(core, "maybe selling the violin")
    await extract_now(core, clock)
    assert len(delivery.sent) == 1  # one question a day at most
    clock.advance(days=1)
    await run(core, "a new day")
    await extract_now(core, clock)
    assert len(delivery.sent) == 2
    assert "old violin" in delivery.sent[1][1].text

    confirmed = await press(core, question, "✓ Yes")
    assert confirmed.text == (
        "Thanks — I'll keep it in mind: “The person may be taking up the cello” (m1)."
    )
    cello = await core.memories.get(user, 1)
    assert cello is not None and not cello.unsure and cello.confidence == 0.7
    clock.advance(hours=2)
    standing, _ = await say(core, scripted_llm, "hello there")
    assert "The person may be taking up the cello" in sections(standing)["About them"]
    await core.memory.sweep(idle_gap=timedelta(minutes=30))
    clock.advance(days=2)
    await run(core, "more news")
    await extract_now(core, clock)
    assert len(delivery.sent) == 2  # each unsure memory is asked about once


async def test_a_rejected_unsure_memory_leaves_no_trace_in_prompts(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    await alice(core, clock)
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = RuleExtractor()
    extractor.add("violin", content="The person might sell their old violin", confidence=0.6)
    scripted_llm.tools["record_memories"] = extractor
    await run(core, "I could sell my old violin to Marta")
    await extract_now(core, clock)
    ((_, question),) = delivery.sent

    rejected = await press(core, question, "✗ No")
    assert rejected.text.startswith("Forgotten: “The person might sell their old violin” (m1)")
    clock.advance(hours=1)
    await run(core, "what instrument should I sell, and to whom?")
    request = last_chat(scripted_llm)
    seen = " ".join([request.standing_system, request.turn_context, *map(str, request.turns)])
    assert "violin" not in seen and "Marta" not in seen


async def test_dead_memories_are_searchable_then_purged_with_their_rows_after_retention(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    user = await alice(core, clock)
    first = await add(core, user, "The person worries about the flat viewing", category="thread")
    flat = await core.memories.supersede(
        user,
        first.short_id,
        Candidate(
            "The person worries about the flat viewing on Elm Road",
            "thread",
            "active",
            6,
            0.9,
            expires_at=MONDAY - timedelta(days=31),
        ),
        source="extracted",
        actor="extraction",
    )
    kept = await add(
        core,
        user,
        "The person once sold a bicycle",
        category="thread",
        expires_at=MONDAY - timedelta(days=31),
    )
    await patrol(core, user)  # expired a month ago, never recalled: archived (dead)
    assert (await row(core, flat.id)).status == "dead"
    found = await core.memories.find_by_text(user, "flat viewing", include_dead=True)
    assert [m.id for m in found] == [flat.id]
    assert await core.memories.find_by_text(user, "flat viewing") == []
    _, now = await say(core, scripted_llm, "how did the flat viewing go?")
    assert RECALLED not in now or all("flat" not in line for line in now[RECALLED])

    clock.advance(days=89)
    await patrol(core, user)
    assert (await row(core, flat.id)).status == "dead"
    clock.advance(days=2)
    await patrol(core, user)
    async with core.sessions() as db:
        left = set(await db.scalars(select(Memory.id).where(Memory.user_id == user)))
        events = await db.scalar(
            select(func.count()).where(MemoryEvent.memory_id.in_([first.id, flat.id]))
        )
    assert left.isdisjoint({first.id, flat.id}) and events == 0
    assert kept.id not in left


async def test_a_retention_of_zero_keeps_dead_memories(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    user = await alice(core, clock)
    old = await add(
        core,
        user,
        "The person once sold a bicycle",
        category="thread",
        expires_at=MONDAY - timedelta(days=31),
    )
    await patrol(core, user, memory_retention_days=0)
    clock.advance(days=400)
    await patrol(core, user, memory_retention_days=0)
    assert (await row(core, old.id)).status == "dead"


async def test_the_question_waits_for_the_persons_window(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    await alice(core, clock)
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = RuleExtractor()
    extractor.add("cello", content="The person may be taking up the cello", confidence=0.55)
    scripted_llm.tools["record_memories"] = extractor
    clock.current = MONDAY.replace(hour=22, minute=10)  # in her quiet hours (22:00-08:00)
    await run(core, "thinking about the cello")
    await extract_now(core, clock)
    assert delivery.sent == []
    clock.current = MONDAY.replace(hour=8, minute=1) + timedelta(days=1)
    await core.memory.notices.release()
    ((_, question),) = delivery.sent
    assert question.text.startswith("Did I get this right?")
    assert "✓ Yes" in [b.label for row in question.buttons for b in row]


async def test_remembering_ones_own_words_again_affirms_them(core: Core, clock: FakeClock) -> None:
    user = await alice(core, clock)
    await run(core, "/remember my sister lives in Lyon")
    clock.advance(days=3)
    await run(core, "/remember my sister lives in Lyon")
    (item,) = await core.memories.live(user)
    assert (item.mention_count, item.last_confirmed_at) == (2, clock.now())
    assert await affirm_events(core, item.id) == ["restated"]
