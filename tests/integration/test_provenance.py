"""Every memory records the messages it came from, whatever made it (the chat model's
`remember` tool, `/remember`, an edit), and forgetting it hides those words from every
later prompt, recall result, session summary and diary entry. The chat model is offered
its memory tool only in private chats."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from bot.bootstrap import Core
from bot.domain import IncomingMessage
from bot.llm import LLMRequest
from memory.recall.retrieval import recall
from memory.store.diary import recent_entries
from memory.store.tables import Memory, Message
from memory.store.tables import Session as SessionRow
from scheduler.patrol import run_nightly
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, text, tool_call
from tests.integration.test_scheduler_diary import EchoDiarist
from tests.integration.test_scheduler_support import add_person, say, scheduler_deps
from tests.support.catalog import rows_mentioning
from tests.support.commands import press, run

MONDAY = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
NIGHT = datetime(2026, 3, 3, 2, 5, tzinfo=UTC)  # 03:05 in Copenhagen: the diary is written
TUESDAY = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
SECRET = "zanzibar"


def echo_summary(request: LLMRequest) -> dict[str, object]:
    """A session summary that repeats everything it was shown."""
    return {"summary": request.turns[0].content[-700:]}


async def memory_row(core: Core, user_id: int, short_id: int) -> Memory:
    async with core.sessions() as db:
        return (
            await db.scalars(
                select(Memory).where(Memory.user_id == user_id, Memory.short_id == short_id)
            )
        ).one()


async def summaries(core: Core, user_id: int) -> list[str]:
    async with core.sessions() as db:
        rows = await db.scalars(select(SessionRow.summary).where(SessionRow.user_id == user_id))
        return list(rows)


async def a_secret_saved_by_the_chat_tool(
    core: Core, clock: FakeClock, llm: ScriptedLLM
) -> tuple[int, list[int]]:
    """Alice asks, in a burst of two messages, to remember her locker code; the model
    saves it with its tool; the session is summarised and the diary written from it."""
    llm.tools["write_diary"] = EchoDiarist()
    llm.tools["write_session_summary"] = echo_summary
    clock.current = MONDAY
    alice = await add_person(core, tz="Europe/Copenhagen", checkin=None)
    await run_nightly(scheduler_deps(core))  # schedules tonight's patrol and diary
    await core.router.record(
        IncomingMessage("console", "alice", "my locker code is zanzibar", chat_id="chat-alice")
    )
    llm.script += [
        tool_call("remember", {"text": "Their locker code is zanzibar"}),
        text("Saved — your locker code is zanzibar."),
    ]
    await say(core, "please remember that")
    await say(core, "thanks, off to the gym now")
    async with core.sessions() as db:
        said = list(
            await db.scalars(
                select(Message.id)
                .where(Message.user_id == alice, Message.role == "user")
                .order_by(Message.id)
                .limit(2)
            )
        )
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))  # closed: summarised
    assert any(SECRET in s.lower() for s in await summaries(core, alice))
    clock.current = NIGHT
    await run_nightly(scheduler_deps(core))
    (entry,) = await recent_entries(core.sessions, user_id=alice)
    assert any(SECRET in line.lower() for line in entry.lines)
    return alice, said


async def test_the_chat_tool_records_the_turn_it_was_called_in(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    alice, said = await a_secret_saved_by_the_chat_tool(core, clock, scripted_llm)
    saved = await memory_row(core, alice, 1)
    assert saved.content == "Their locker code is zanzibar" and saved.source == "user"
    assert sorted(saved.source_message_ids) == said  # both messages of the burst


async def test_forgetting_what_the_chat_tool_saved_leaves_no_trace_of_its_words(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    alice, _ = await a_secret_saved_by_the_chat_tool(core, clock, scripted_llm)
    clock.current = TUESDAY
    assert (await run(core, "/forget m1")).text.startswith("Forgotten")

    await say(core, "what is my locker code again? zanzibar?")
    prompt = scripted_llm.chat_requests[-1]
    earlier = [t.content.lower() for t in prompt.turns][:-1]  # all but the probe itself
    assert not any(SECRET in t for t in earlier), earlier
    assert SECRET not in prompt.dynamic_system.lower()  # no memory, recall, summary, notes
    found = await recall(
        core.sessions,
        core.memory._embedder,
        user_id=alice,
        query="locker code zanzibar",
        now=clock.now(),
        exclude_session_id=None,
    )
    assert all(SECRET not in r.content.lower() for r in found if r.created_at < TUESDAY), (
        found
    )  # only today's probe may still say it
    assert not any(SECRET in s.lower() for s in await summaries(core, alice))
    (entry,) = await recent_entries(core.sessions, user_id=alice)
    assert entry.withdrawn
    assert SECRET not in (await run(core, "/diary")).text.lower()


async def test_a_summary_dropped_by_forgetting_is_written_again_without_the_words(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    alice, _ = await a_secret_saved_by_the_chat_tool(core, clock, scripted_llm)
    clock.current = TUESDAY
    await run(core, "/forget m1")
    assert await summaries(core, alice) == [""]
    clock.current = NIGHT + timedelta(days=1)
    await run_nightly(scheduler_deps(core))
    (summary,) = await summaries(core, alice)
    assert "off to the gym" in summary and SECRET not in summary.lower()

    undone = await press(core, await run(core, "/memory trash"), "♻ Restore m1")
    assert "Restored" in undone.text
    assert await summaries(core, alice) == [""]  # written again with the words back
    clock.current = NIGHT + timedelta(days=2)
    await run_nightly(scheduler_deps(core))
    (summary,) = await summaries(core, alice)
    assert SECRET in summary.lower() and "off to the gym" in summary


async def test_restoring_it_brings_the_words_back(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    alice, _ = await a_secret_saved_by_the_chat_tool(core, clock, scripted_llm)
    clock.current = TUESDAY
    forgotten = await run(core, "/forget m1")
    assert "is back as it was" in (await press(core, forgotten, "↩ Undo")).text
    await say(core, "what was my locker code?")
    assert SECRET in scripted_llm.last_prompt_text().lower()
    (entry,) = await recent_entries(core.sessions, user_id=alice)
    assert not entry.withdrawn  # the diary entry is shown again


async def test_remember_keeps_its_text_as_the_source_never_as_a_turn(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    await say(core, "hello")
    reply = await run(core, "/remember my locker code is zanzibar")
    assert reply.text.startswith("Got it")
    await run(core, "/remember my locker code is zanzibar")  # said again: one more source
    alice = (
        await core.store.ensure_person(
            platform="console", platform_user_id="alice", chat_id=None, display_name=None
        )
    ).id
    saved = await memory_row(core, alice, 1)
    async with core.sessions() as db:
        sources = (
            await db.execute(
                select(Message.content, Message.status).where(
                    Message.id.in_(saved.source_message_ids)
                )
            )
        ).all()
    assert sorted(sources) == [("/remember my locker code is zanzibar", "command")] * 2

    await say(core, "how are you?")
    turns = [t.content for t in scripted_llm.chat_requests[-1].turns]
    assert turns == ["hello", "Tell me more.", "how are you?"]  # commands are not turns

    await run(core, "/forget m1")
    await say(core, "anything new?")
    assert SECRET not in scripted_llm.last_prompt_text().lower()
    exported = json.loads((await run(core, "/export")).document.content)  # type: ignore[union-attr]
    commands = [m for m in exported["messages"] if m["status"] == "command"]
    assert len(commands) == 2 and all(m["content"] is None for m in commands)
    assert await core.memories.purge_trash(clock.now() + timedelta(days=31)) == 1
    assert await rows_mentioning(core.sessions, SECRET, user_id=alice) == {}


async def test_an_edit_is_forgotten_with_its_words(core: Core, clock: FakeClock) -> None:
    await run(core, "/remember I keep my spare key under the mat")
    await run(core, "/edit m1 I keep my spare key in zanzibar box")
    alice = (
        await core.store.ensure_person(
            platform="console", platform_user_id="alice", chat_id=None, display_name=None
        )
    ).id
    assert await rows_mentioning(core.sessions, SECRET, user_id=alice)
    await run(core, "/forget m2")
    assert await core.memories.purge_trash(clock.now() + timedelta(days=31)) == 2
    assert await rows_mentioning(core.sessions, SECRET, user_id=alice) == {}
    assert await rows_mentioning(core.sessions, "spare key", user_id=alice) == {}


async def test_a_group_chat_is_offered_no_memory_tool(
    core: Core, scripted_llm: ScriptedLLM
) -> None:
    await say(core, "hi")
    assert [t.name for t in scripted_llm.chat_requests[-1].tools] == [
        "remember",
        "confirm_memory",
        "update_memory",
        "forget_memory",
        "search_memory",
    ]
    scripted_llm.script.append(tool_call("remember", {"text": "They love zanzibar"}))
    group = IncomingMessage(
        "console", "alice", "remember I love zanzibar", chat_id="group-1", is_private=False
    )
    await core.router.handle(group)
    assert scripted_llm.chat_requests[-1].tools == ()
    assert len(scripted_llm.chat_requests) == 2  # a tool call it was not offered is not run
    alice = (
        await core.store.ensure_person(
            platform="console", platform_user_id="alice", chat_id=None, display_name=None
        )
    ).id
    assert await core.memories.live(alice) == []
