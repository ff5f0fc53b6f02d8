"""Continuity across sessions on real PostgreSQL with a controllable clock: what the model
sees does not stop at the session edge. Earlier sessions of the last two days reach the
prompt in order (their last turns, older ones as summaries), the companion's check-ins
among them, with the pauses marked; group chats see only their own turns; forgotten words
never come back."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import Core
from bot.commands.router import Router
from bot.conversation import Conversation, ConversationConfig
from bot.domain import IncomingMessage
from bot.transcript import TIME_NOTES
from memory.care.erasure import hide_sources
from memory.learning.session_summary import summarise_closed_session
from memory.store.tables import Message, Session
from scheduler.checkins import minute_tick
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, context_text, text
from tests.fakes.llm import FakeToolCaller
from tests.integration.conftest import says
from tests.integration.test_scheduler_support import (
    add_person,
    drafts,
    recording,
    say,
    scheduler_deps,
)

Db = async_sessionmaker[AsyncSession]
CPH = "Europe/Copenhagen"


def utc(day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    """A moment in March 2026, UTC (Copenhagen is an hour ahead)."""
    return datetime(2026, 3, day, hour, minute, second, tzinfo=UTC)


def in_group(text_: str, *, group: str = "group-1") -> IncomingMessage:
    return IncomingMessage("console", "alice", text_, chat_id=group, is_private=False)


def turns_of(llm: ScriptedLLM) -> list[tuple[str, str]]:
    return [(t.role, t.content) for t in llm.chat_requests[-1].turns]


async def sessions_of(db: Db) -> list[Session]:
    async with db() as s:
        return list((await s.scalars(select(Session).order_by(Session.id))).all())


async def message_id(db: Db, content: str) -> int:
    async with db() as s:
        found = await s.scalar(select(Message.id).where(Message.content == content))
    assert found is not None
    return found


async def in_copenhagen(conversation: Conversation) -> None:
    """Alice, living in Copenhagen."""
    person = await conversation.store.ensure_person(
        platform="console", platform_user_id="alice", chat_id="chat-alice", display_name="Alice"
    )
    await conversation.store.update_person(person.id, timezone=CPH)


async def test_a_conversation_resumed_two_hours_later_shows_what_was_said_before(
    router: Router, conversation: Conversation, llm: ScriptedLLM, clock: FakeClock, db: Db
) -> None:
    await in_copenhagen(conversation)
    clock.current = utc(2, 9)
    llm.script.append(text("Good luck with the dentist!"))
    await router.handle(says("I'm off to the dentist, a bit nervous"))
    clock.advance(hours=2, minutes=5)
    await router.handle(says("back, it was fine"))

    assert turns_of(llm) == [
        ("user", "[Mon 10:00] I'm off to the dentist, a bit nervous"),
        ("assistant", "Good luck with the dentist!"),
        ("user", "— 2 hours later —\n[Mon 12:05] back, it was fine"),
    ]
    assert TIME_NOTES in context_text(llm.chat_requests[-1])
    # Sessions still bound extraction: the first one closed and is due for it.
    first, second = await sessions_of(db)
    assert first.closed_at is not None and first.extraction_due and second.closed_at is None


async def test_after_a_night_the_model_reads_the_next_day(
    router: Router, conversation: Conversation, llm: ScriptedLLM, clock: FakeClock
) -> None:
    await in_copenhagen(conversation)
    clock.current = utc(2, 21, 30)  # 22:30 in Copenhagen
    llm.script.append(text("Sleep well!"))
    await router.handle(says("going to bed, big day tomorrow"))
    clock.current = utc(3, 7, 15)  # 08:15 the next morning
    await router.handle(says("morning!"))

    assert turns_of(llm) == [
        ("user", "[Mon 22:30] going to bed, big day tomorrow"),
        ("assistant", "Sleep well!"),
        ("user", "— the next day —\n[Tue 08:15] morning!"),
    ]


async def test_a_checkin_answered_five_hours_later_is_the_turn_the_reply_answers(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    clock.current = utc(2, 19)  # Monday 20:00 in Copenhagen
    recording(core)
    drafts(scripted_llm, message="Morning! Ready for the interview?")
    await add_person(core, tz=CPH)
    scripted_llm.script.append(text("Fingers crossed for tomorrow!"))
    await say(core, "my job interview is tomorrow at 11")

    clock.current = utc(3, 8, 0, 30)  # Tuesday 09:00: the check-in goes out
    await minute_tick(scheduler_deps(core))
    clock.current = utc(3, 13, 1)  # 14:01, five hours later
    await say(core, "it went really well!")

    assert turns_of(scripted_llm) == [
        ("user", "[Mon 20:00] my job interview is tomorrow at 11"),
        ("assistant", "Fingers crossed for tomorrow!"),
        ("user", "— the next day —\n[Tue 09:00] You wrote:"),
        ("assistant", "Morning! Ready for the interview?"),
        ("user", "— 5 hours later —\n[Tue 14:01] it went really well!"),
    ]
    async with core.sessions() as s:
        rows = (await s.scalars(select(Message).order_by(Message.id))).all()
    # The check-in, the reply to it and the answer each sit in a session of their own.
    assert len({m.session_id for m in rows}) == 3


async def test_turns_older_than_two_days_are_left_out(
    router: Router, llm: ScriptedLLM, clock: FakeClock
) -> None:
    await router.handle(says("we adopted a cat called Miso"))
    clock.advance(hours=47)
    await router.handle(says("hello again"))
    assert "Miso" in turns_of(llm)[0][1]

    clock.advance(hours=47)  # the Miso session ended 94 hours ago, the last one 47
    await router.handle(says("and hello once more"))
    contents = [content for _, content in turns_of(llm)]
    assert not any("Miso" in c for c in contents)
    assert contents == [
        "[Wed 08:00] hello again",
        "Tell me more.",
        "— 2 days later —\n[Fri 07:00] and hello once more",
    ]


async def test_an_older_session_that_does_not_fit_is_shown_by_its_summary(
    conversation: Conversation, llm: ScriptedLLM, clock: FakeClock, db: Db
) -> None:
    small = dataclasses.replace(conversation, config=ConversationConfig(context_tokens=3000))
    router = Router(small)
    await in_copenhagen(small)
    clock.current = utc(2, 18)
    parts = [
        f"Part {n} of the moving story: " + "we packed boxes all day. " * 60 for n in (1, 2, 3)
    ]
    for part in parts:
        await router.handle(says(part))
        clock.advance(minutes=1)
    clock.current = utc(3, 7)  # the next morning: the long session closes
    llm.script.append(text("Good morning, how are the boxes?"))
    await router.handle(says("good morning"))
    long_session = (await sessions_of(db))[0]
    written = await summarise_closed_session(
        sessions=db,
        user_id=long_session.user_id,
        session_id=long_session.id,
        llm=FakeToolCaller(script=[{"summary": "They told the long story of moving to Aarhus."}]),
        timezone=CPH,
    )
    assert written
    clock.current = utc(3, 13)
    await router.handle(says("back again"))

    request = llm.chat_requests[-1]
    contents = [t.content for t in request.turns]
    assert not any("Part 1 of" in c for c in contents)
    assert any("Part 3 of the moving story" in c for c in contents)
    assert contents[-3:] == [
        "— the next day —\n[Tue 08:00] good morning",
        "Good morning, how are the boxes?",
        "— 6 hours later —\n[Tue 14:00] back again",
    ]
    assert (
        "<earlier_conversations>\n"
        "- Mon 19:00–19:02: They told the long story of moving to Aarhus.\n"
        "</earlier_conversations>" in context_text(request)
    )


async def test_a_session_with_a_running_summary_shows_earlier_ones_only_as_summaries(
    router: Router, conversation: Conversation, llm: ScriptedLLM, clock: FakeClock, db: Db
) -> None:
    await router.handle(says("my garden is full of tulips"))
    clock.advance(hours=3)
    await router.handle(says("now about work"))
    clock.advance(minutes=1)
    await router.handle(says("my boss wants the report friday"))
    first, current = await sessions_of(db)
    await conversation.store.save_summary(
        user_id=current.user_id,
        session_id=first.id,
        summary="They talked about the tulips in their garden.",
        through_id=await message_id(db, "my garden is full of tulips"),
    )
    folded = await message_id(db, "now about work")
    await conversation.store.save_summary(
        user_id=current.user_id,
        session_id=current.id,
        summary="They started talking about work.",
        through_id=folded + 1,  # the person's message and the reply to it
    )
    clock.advance(minutes=1)
    await router.handle(says("any advice?"))

    request = llm.chat_requests[-1]
    contents = [t.content for t in request.turns]
    assert contents == ["my boss wants the report friday", "Tell me more.", "any advice?"]
    system = context_text(request)
    tulips = system.index("They talked about the tulips in their garden.")
    assert tulips < system.index("They started talking about work.")


async def test_a_group_chat_sees_only_its_own_earlier_turns(
    router: Router, conversation: Conversation, llm: ScriptedLLM, clock: FakeClock, db: Db
) -> None:
    await router.handle(says("my diagnosis came back: it's ADHD"))
    clock.advance(hours=2)
    llm.script.append(text("Try Paterson, it's gentle."))
    await router.handle(in_group("hey everyone, what's a good film?"))
    first = (await sessions_of(db))[0]
    await conversation.store.save_summary(
        user_id=first.user_id,
        session_id=first.id,
        summary="They shared their ADHD diagnosis.",
        through_id=await message_id(db, "my diagnosis came back: it's ADHD"),
    )
    clock.advance(hours=20)
    await router.handle(says("I feel calmer about the diagnosis today"))
    clock.advance(hours=2)
    await router.handle(in_group("thanks for the film tip yesterday!"))

    request = llm.chat_requests[-1]
    assert [t.content for t in request.turns] == [
        "[Mon 11:00] hey everyone, what's a good film?",
        "Try Paterson, it's gentle.",
        "— the next day —\n[Tue 09:00] thanks for the film tip yesterday!",
    ]
    everything = llm.last_prompt_text()
    assert "ADHD" not in everything and "diagnosis" not in everything
    assert "<earlier_conversations>" not in everything


async def test_forgotten_words_never_reach_a_later_prompt(
    router: Router, llm: ScriptedLLM, clock: FakeClock, db: Db
) -> None:
    await router.handle(says("my ex Sam still texts me"))
    clock.advance(minutes=1)
    await router.handle(says("anyway, I went hiking"))
    user_id = (await sessions_of(db))[0].user_id
    await hide_sources(
        db, user_id=user_id, message_ids=[await message_id(db, "my ex Sam still texts me")]
    )
    clock.advance(hours=3)
    await router.handle(says("what a day"))

    everything = llm.last_prompt_text()
    assert "Sam" not in everything
    assert "anyway, I went hiking" in everything
    assert [t.content for t in llm.chat_requests[-1].turns][-1] == (
        "— 3 hours later —\n[Mon 12:01] what a day"
    )
