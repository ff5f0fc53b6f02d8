"""The chat model's memory tools through the whole core on real PostgreSQL, with a
scripted model: update, forget and search, the notice with Undo under the reply, the
protection of what the person set themselves or pinned, and reviving on search."""

from __future__ import annotations

import contextlib
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import Core
from bot.commands.notices import TOOL_HEADING
from bot.domain import Reply
from bot.memory_tools import PROTECTED
from memory.store.items import Candidate
from memory.store.tables import HeldNotice, Memory, MemoryEvent, Message
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, context_text, text, tool_call
from tests.fakes.delivery import RecordingDelivery
from tests.support.commands import labels, press, run, says


async def _person(core: Core, user: str = "alice") -> int:
    person = await core.store.ensure_person(
        platform="console", platform_user_id=user, chat_id=f"chat-{user}", display_name=user
    )
    return person.id


async def _turn(core: Core, words: str, user: str = "alice") -> Reply:
    reply = await core.router.handle(says(words, user))
    await core.background.drain()
    return reply


async def _noticed(core: Core, user_id: int, content: str, **fields: object) -> int:
    """A memory extraction made (source 'extracted'); its short id."""
    item = await core.memories.add(
        user_id,
        Candidate(content=content, category="fact", tier="core", importance=6, confidence=0.9),
        source="extracted",
        actor="extraction",
    )
    if fields:
        async with core.sessions.begin() as db:
            await db.execute(update(Memory).where(Memory.id == item.id).values(**fields))
    return item.short_id


def _undo_labels(reply: Reply) -> list[str]:
    return [label for label in labels(reply) if label.startswith("↩")]


def _result(llm: ScriptedLLM, index: int = 0) -> str:
    """What the tool call `index` of the last turn answered the model."""
    return llm.chat_requests[-1].tool_exchange[index][1][0].content


async def _row(db: async_sessionmaker[AsyncSession], user_id: int, short_id: int) -> Memory:
    async with db() as s:
        found = await s.scalar(
            select(Memory).where(Memory.user_id == user_id, Memory.short_id == short_id)
        )
    assert found is not None
    return found


async def test_an_update_supersedes_shows_a_notice_and_undoes(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    alice = await _person(core)
    short = await _noticed(core, alice, "Their sister's birthday is 4 May")
    scripted_llm.script += [
        tool_call(
            "update_memory",
            {"memory": "sister's birthday", "text": "Their sister's birthday is 5 May"},
        ),
        text("Got it, 5 May then."),
    ]
    reply = await _turn(core, "oops, my sister's birthday is the 5th of May, not the 4th")
    assert reply.text.startswith("Got it, 5 May then.\n\n" + TOOL_HEADING)
    assert "Updated m1: “Their sister's birthday is 5 May” (now m2; it said" in reply.text
    assert labels(reply) == ["↩ Undo m2"]
    assert "Updated: m1 is now m2" in _result(scripted_llm)
    old, new = await _row(db, alice, short), await _row(db, alice, 2)
    assert old.superseded_by == new.id and new.source == "extracted"
    assert new.valid_until is None and "5 May" in new.content
    async with db() as s:
        (source,) = new.source_message_ids
        assert "5th of May" in (await s.get_one(Message, source)).content
        actor = await s.scalar(
            select(MemoryEvent.actor).where(
                MemoryEvent.memory_id == new.id, MemoryEvent.action == "supersede"
            )
        )
    assert actor == "companion"

    await _turn(core, "thanks")
    assert "5 May" in scripted_llm.last_prompt_text()
    undone = await press(core, reply, "↩ Undo")
    assert "is back as it was" in undone.text
    assert (await _row(db, alice, short)).valid_until is None
    await _turn(core, "and now?")
    prompt = scripted_llm.last_prompt_text()
    assert "4 May" in prompt and "birthday is 5 May" not in prompt


async def test_a_forget_hides_the_words_and_undo_brings_them_back(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    alice = await _person(core)
    await _turn(core, "my old flat was on Zanzibarvej")
    await _noticed(core, alice, "Their old flat was on Zanzibarvej")
    async with db.begin() as s:  # the memory came from that message
        first = await s.scalar(select(Message.id).where(Message.role == "user"))
        await s.execute(update(Memory).values(source_message_ids=[first]))
    scripted_llm.script += [
        tool_call("forget_memory", {"memory": "m1"}),
        text("Done, it's gone."),
    ]
    reply = await _turn(core, "please forget about my old flat")
    assert "• Forgot: “Their old flat was on Zanzibarvej” (m1;" in reply.text
    row = await _row(db, alice, 1)
    assert row.status == "forgotten"
    async with db() as s:
        assert (await s.get_one(Message, first)).status == "forgotten"
    await _turn(core, "what was my address?")
    assert "zanzibarvej" not in scripted_llm.last_prompt_text().lower()

    await press(core, reply, "↩ Undo")
    assert (await _row(db, alice, 1)).status == "active"
    async with db() as s:
        assert (await s.get_one(Message, first)).status != "forgotten"


async def test_what_the_person_set_or_pinned_needs_their_own_words(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    alice = await _person(core)
    await run(core, "/remember I'm allergic to penicillin")
    await _noticed(core, alice, "They like long walks by the harbour")
    await run(core, "/pin m2")

    # The model forgets on its own, or claims a permission the person never gave.
    scripted_llm.script += [
        tool_call("forget_memory", {"memory": "m1"}, "t1"),
        tool_call(
            "forget_memory",
            {"memory": "m1", "person_asked": "please forget my penicillin allergy"},
            "t2",
        ),
        text("Okay."),
    ]
    reply = await _turn(core, "I had a rough day at work")
    assert TOOL_HEADING not in reply.text and not _undo_labels(reply)
    assert _result(scripted_llm, 0) == PROTECTED.format(label="m1")
    assert _result(scripted_llm, 1) == PROTECTED.format(label="m1")
    assert (await _row(db, alice, 1)).status == "active"

    # A quote of the person's words about something else, or asking for another change.
    scripted_llm.script += [
        tool_call(
            "update_memory",
            {"memory": "m2", "text": "They hate walks", "person_asked": "forget the walks"},
            "t3",
        ),
        text("Okay."),
    ]
    await _turn(core, "forget the walks by the harbour, they're boring now")
    assert _result(scripted_llm) == PROTECTED.format(label="m2")
    assert (await _row(db, alice, 2)).valid_until is None

    # Their own words: the id, or a verbatim request about it.
    scripted_llm.script += [
        tool_call(
            "forget_memory",
            {"memory": "m2", "person_asked": "forget the walks by the harbour"},
            "t4",
        ),
        text("Forgotten."),
    ]
    await _turn(core, "Forget the walks by the harbour, please")
    assert (await _row(db, alice, 2)).status == "forgotten"
    scripted_llm.script += [
        tool_call("update_memory", {"memory": "m1", "text": "They are allergic to amoxicillin"}),
        text("Updated."),
    ]
    reply = await _turn(core, "m1 is wrong: it's amoxicillin, not penicillin")
    assert "Updated m1" in reply.text
    new = await _row(db, alice, 3)
    assert new.source == "user" and "amoxicillin" in new.content


async def test_search_finds_faded_memories_and_revives_the_dead(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], clock: FakeClock
) -> None:
    alice = await _person(core)
    bob = await _person(core, "bob")
    dead = await _noticed(core, alice, "They played the cello in a youth orchestra", status="dead")
    dying = await _noticed(core, alice, "They want to learn the cello again", status="dying")
    await _noticed(core, alice, "Their cat is called Miso")
    expired = await _noticed(
        core, alice, "They had a cello exam last spring", expires_at=clock.now() - timedelta(days=3)
    )
    await _noticed(core, bob, "He plays the cello in a quartet")
    played = "They played the cello in a youth orchestra"
    await _turn(core, "the youth orchestra was fun")
    assert played not in context_text(scripted_llm.chat_requests[-1])  # retired: not recalled

    scripted_llm.script += [
        tool_call("search_memory", {"query": "cello orchestra"}),
        text("You played in a youth orchestra!"),
    ]
    reply = await _turn(core, "did I ever tell you about music I played?")
    assert not _undo_labels(reply)  # a search changes nothing the person must undo
    found = _result(scripted_llm)
    assert 'id="m1"' in found and 'faded="yes"' in found and "youth orchestra" in found
    assert 'id="m2"' in found and "quartet" not in found and "Miso" not in found
    assert f'id="m{expired}" kind="core/fact" source="noticed" faded="yes"' in found
    row = await _row(db, alice, dead)
    assert (row.status, row.recall_count, row.last_recalled_at) == ("dying", 1, clock.now())
    # the search counts it (the turn's own recall may have counted it already)
    assert (await _row(db, alice, dying)).recall_count >= 1
    async with db() as s:
        event = await s.scalar(
            select(MemoryEvent).where(
                MemoryEvent.memory_id == row.id, MemoryEvent.action == "revive"
            )
        )
    assert event is not None and event.actor == "companion"
    assert event.details["previous_status"] == "dead"

    clock.advance(minutes=1)
    await _turn(core, "the youth orchestra was fun")
    assert played in context_text(scripted_llm.chat_requests[-1])  # recallable again


async def test_a_change_during_quiet_hours_rides_on_the_reply(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], clock: FakeClock
) -> None:
    alice = await _person(core)
    await run(core, "/timezone UTC")
    await _noticed(core, alice, "They work night shifts at the bakery")
    clock.advance(hours=14, minutes=30)  # 23:30, in the default quiet hours
    scripted_llm.script += [
        tool_call("update_memory", {"memory": "m1", "text": "They work day shifts at the bakery"}),
        text("Day shifts, nice."),
    ]
    reply = await _turn(core, "I moved to day shifts at the bakery")
    assert TOOL_HEADING in reply.text and labels(reply) == ["↩ Undo m2"]
    async with db() as s:
        assert (await s.scalars(select(HeldNotice))).all() == []


async def test_a_turn_that_fails_after_a_change_notices_it_later_in_the_window(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], clock: FakeClock
) -> None:
    alice = await _person(core)
    await run(core, "/timezone UTC")
    await _noticed(core, alice, "They drive a red bike")
    clock.advance(hours=14, minutes=30)
    scripted_llm.script += [
        tool_call("forget_memory", {"memory": "m1"}),
        RuntimeError("the turn breaks after the tool ran"),
    ]
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    with contextlib.suppress(RuntimeError):
        await _turn(core, "forget the bike thing")
    await core.background.drain()
    async with db() as s:
        (held,) = (await s.scalars(select(HeldNotice))).all()
    assert held.status == "held" and held.text.startswith(TOOL_HEADING)
    assert "bike" not in held.text  # no held text keeps the words of what was let go
    assert await core.memory.notices.release() == {}  # still quiet hours
    clock.advance(hours=9)  # 08:30: the window opens
    assert (await core.memory.notices.release())["sent"] == 1
    ((_, sent),) = delivery.sent
    assert "• Forgot m1 (in /memory trash" in sent.text and labels(sent) == ["↩ Undo m1"]
    await press(core, sent, "↩ Undo")
    assert (await _row(db, alice, 1)).status == "active"


async def test_an_update_whose_turn_failed_is_noticed_by_id_when_the_window_opens(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], clock: FakeClock
) -> None:
    alice = await _person(core)
    await run(core, "/timezone UTC")
    await _noticed(core, alice, "They drive a red bike")
    clock.advance(hours=14, minutes=30)
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    scripted_llm.script += [
        tool_call("update_memory", {"memory": "m1", "text": "They drive a blue bike"}),
        RuntimeError("the turn breaks after the tool ran"),
    ]
    with contextlib.suppress(RuntimeError):
        await _turn(core, "my bike is blue now")
    await core.background.drain()
    async with db() as s:
        (held,) = (await s.scalars(select(HeldNotice))).all()
    assert (held.text, held.memory_ids) == ("", [(await _row(db, alice, 2)).id])
    clock.advance(hours=9)
    await core.memory.notices.release()
    ((_, sent),) = delivery.sent
    assert "They drive a blue bike (m2)" in sent.text and labels(sent) == ["↩ Undo m2"]
    await press(core, sent, "↩ Undo")
    assert (await _row(db, alice, 1)).valid_until is None


async def test_the_model_goes_down_after_a_change_and_the_apology_carries_the_notice(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    from bot.errors import LLMUnavailable

    alice = await _person(core)
    await _noticed(core, alice, "They are learning Danish")
    scripted_llm.script += [
        tool_call("forget_memory", {"memory": "Danish"}),
        LLMUnavailable("down"),
    ]
    reply = await _turn(core, "forget that I'm learning Danish")
    assert reply.text.startswith("Sorry") and "• Forgot:" in reply.text
    assert labels(reply) == ["↩ Undo m1"]


async def test_description_with_several_matches_asks_for_an_id(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    alice = await _person(core)
    await _noticed(core, alice, "Their brother lives in Oslo")
    await _noticed(core, alice, "Their brother is a chef")
    scripted_llm.script += [
        tool_call("forget_memory", {"memory": "brother"}),
        text("Which one?"),
    ]
    reply = await _turn(core, "forget about my brother")
    assert not _undo_labels(reply)
    result = _result(scripted_llm)
    assert "several memories match" in result and 'id="m1"' in result and 'id="m2"' in result
    assert (await _row(db, alice, 1)).status == "active"
    assert (await _row(db, alice, 2)).status == "active"


async def test_another_persons_memory_cannot_be_named(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    await _person(core)
    bob = await _person(core, "bob")
    await _noticed(core, bob, "He is afraid of flying")
    scripted_llm.script += [tool_call("forget_memory", {"memory": "m1"}), text("Hm.")]
    await _turn(core, "forget m1")
    assert _result(scripted_llm) == "Nothing was changed: there is no current memory m1."
    assert (await _row(db, bob, 1)).status == "active"
