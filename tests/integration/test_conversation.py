"""The conversation use case on real PostgreSQL: store first, never lose a word."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.commands.router import Router
from bot.conversation import APOLOGY, EMPTY_REPLY, Conversation
from memory.store.tables import Identity, Message, Session, User
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, text
from tests.integration.conftest import says


async def _messages(db: async_sessionmaker[AsyncSession]) -> list[Message]:
    async with db() as s:
        return list((await s.scalars(select(Message).order_by(Message.id))).all())


async def test_a_turn_stores_both_sides_and_records_usage(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    llm.script.append(text("Hello Alice, good to meet you."))
    reply = await router.handle(says("Hi, I'm Alice"))
    assert reply.text == "Hello Alice, good to meet you."
    rows = await _messages(db)
    assert [(m.role, m.content, m.status) for m in rows] == [
        ("user", "Hi, I'm Alice", "answered"),
        ("assistant", "Hello Alice, good to meet you.", "stored"),
    ]
    assert rows[1].input_tokens == 10 and rows[1].output_tokens == 5
    assert rows[1].model == "fake-chat"
    request = llm.requests[0]
    assert request.role == "chat" and "Companion" in request.stable_system
    assert [t.content for t in request.turns] == ["Hi, I'm Alice"]


async def test_the_message_is_stored_before_the_model_is_called(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    seen: list[list[str]] = []

    async def complete_after_looking(request: object) -> object:
        seen.append([m.content for m in await _messages(db)])
        return text("ok")

    llm.complete = complete_after_looking  # type: ignore[method-assign]
    await router.handle(says("store me first"))
    assert seen == [["store me first"]]


async def test_when_the_model_is_down_the_person_gets_an_apology_and_loses_nothing(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    llm.down = True
    reply = await router.handle(says("My sister Maja visits on Sunday"))
    assert reply.text == APOLOGY
    llm.down = False
    llm.script.append(text("How lovely that Maja is coming!"))
    await router.handle(says("Are you there?"))
    contents = [t.content for t in llm.requests[-1].turns]
    assert contents == ["My sister Maja visits on Sunday", "Are you there?"]
    rows = await _messages(db)
    # The second turn answered both: the first is no longer waiting.
    assert [m.status for m in rows if m.role == "user"] == ["answered", "answered"]
    assert APOLOGY not in contents


async def test_a_restart_keeps_every_person_session_and_message(
    conversation: Conversation, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    await Router(conversation).handle(says("first"))
    restarted = Router(conversation)  # a new router over the same database
    await restarted.handle(says("second"))
    assert [t.content for t in llm.requests[-1].turns] == ["first", "Tell me more.", "second"]
    async with db() as s:
        assert len((await s.scalars(select(User))).all()) == 1
        assert len((await s.scalars(select(Session))).all()) == 1


async def test_an_idle_gap_closes_the_session_and_marks_it_for_extraction(
    router: Router, llm: ScriptedLLM, clock: FakeClock, db: async_sessionmaker[AsyncSession]
) -> None:
    await router.handle(says("morning"))
    clock.advance(hours=2)
    await router.handle(says("evening"))
    # The closed session still reaches the prompt (the recent past), with the pause marked.
    assert [t.content for t in llm.requests[-1].turns] == [
        "[Mon 09:00] morning",
        "Tell me more.",
        "— 2 hours later —\n[Mon 11:00] evening",
    ]
    async with db() as s:
        sessions = (await s.scalars(select(Session).order_by(Session.id))).all()
    assert [x.closed_at is not None for x in sessions] == [True, False]
    assert sessions[0].extraction_due


async def test_people_are_kept_apart(router: Router, llm: ScriptedLLM) -> None:
    await router.handle(says("my secret is blue", user="alice"))
    await router.handle(says("hello", user="bob"))
    assert "blue" not in llm.last_prompt_text()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", EMPTY_REPLY), ("   \n\t ", EMPTY_REPLY), ("\x00\x01\x7f", EMPTY_REPLY)],
)
async def test_empty_input_gets_a_clear_reply_and_calls_nothing(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], raw: str, expected: str
) -> None:
    assert (await router.handle(says(raw))).text == expected
    assert llm.requests == [] and await _messages(db) == []


async def test_a_very_long_message_is_kept_whole_and_explained(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    long = "word " * 4000
    reply = await router.handle(says(long))
    assert "20,000 characters" in reply.text.replace("19,999", "20,000")
    assert llm.requests == []
    (stored,) = await _messages(db)
    assert stored.content == long.strip() and stored.status == "too_long"
    await router.handle(says("short one"))
    assert [t.content for t in llm.requests[-1].turns] == ["short one"]


async def test_control_characters_and_broken_surrogates_are_cleaned_not_fatal(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    await router.handle(says("hi\x00 there \ud800 friend\x1b"))
    (user_row, _reply) = await _messages(db)
    assert user_row.content == "hi there \ufffd friend"


async def test_an_unknown_command_is_explained_and_not_stored(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    reply = await router.handle(says("/frobnicate now"))
    assert "/frobnicate" in reply.text and "/help" in reply.text
    assert llm.requests == [] and await _messages(db) == []


async def test_a_redelivered_platform_message_is_answered_once(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    await router.handle(says("hello", message_id="42"))
    again = await router.handle(says("hello", message_id="42"))
    assert again.silent and len(llm.requests) == 1
    assert len(await _messages(db)) == 2


async def test_a_redelivered_message_that_was_never_answered_is_answered_now(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    llm.down = True
    await router.handle(says("hello", message_id="7"))
    llm.down = False
    again = await router.handle(says("hello", message_id="7"))
    assert again.text == "Tell me more."
    assert [m.role for m in await _messages(db)] == ["user", "assistant", "assistant"]


async def test_identities_remember_the_private_chat(
    router: Router, db: async_sessionmaker[AsyncSession]
) -> None:
    await router.handle(says("hi"))
    async with db() as s:
        identity = (await s.scalars(select(Identity))).one()
    assert identity.chat_id == "chat-alice" and identity.reachable


async def test_a_message_in_the_prompt_is_answered_by_the_reply_even_if_it_came_later(
    router: Router, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    first = says("my exam went badly", message_id="1")
    await router.record(first)
    await router.record(says("really badly", message_id="2"))
    llm.script.append(text("I'm sorry. What happened?"))
    await router.handle(first)  # e.g. its update came again after a restart
    assert [t.content for t in llm.requests[0].turns] == ["my exam went badly", "really badly"]
    assert [(m.content, m.status) for m in await _messages(db)] == [
        ("my exam went badly", "answered"),
        ("really badly", "answered"),
        ("I'm sorry. What happened?", "stored"),
    ]
