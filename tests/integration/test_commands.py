"""Every command and button of the core, on real PostgreSQL: scoped to the person who
asked, clear about bad input, recorded in memory_events, and undoable."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.domain import ButtonPress, IncomingMessage, Reply
from memory.store.tables import Memory, MemoryEvent, User
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, context_text


def says(text: str, user: str = "alice") -> IncomingMessage:
    return IncomingMessage("console", user, text, chat_id=f"chat-{user}", display_name=user)


async def run(core: Core, text: str, user: str = "alice") -> Reply:
    return await core.router.handle(says(text, user))


async def press(core: Core, reply: Reply, label: str, user: str = "alice") -> Reply:
    button = next(b for row in reply.buttons for b in row if b.label.startswith(label))
    return await core.router.press(
        ButtonPress("console", user, button.action, chat_id=f"chat-{user}")
    )


def labels(reply: Reply) -> list[str]:
    return [b.label for row in reply.buttons for b in row]


async def remember(core: Core, *facts: str, user: str = "alice") -> None:
    for fact in facts:
        reply = await run(core, f"/remember {fact}", user)
        assert reply.text.startswith("Got it"), reply.text


async def test_an_empty_memory_explains_how_memory_works(core: Core) -> None:
    reply = await run(core, "/memory")
    assert "don't remember anything" in reply.text and "/forget" in reply.text
    assert reply.private


async def test_memory_lists_items_grouped_with_ids_sources_and_buttons(core: Core) -> None:
    await remember(core, "my sister is called Maja", "I love hiking")
    await run(core, "/pin m2")
    reply = await run(core, "/memory")
    assert "📌 Pinned\nm2 · I love hiking" in reply.text
    assert "m1 · my sister is called Maja" in reply.text and "you said" in reply.text
    assert labels(reply) == ["🗑 m2", "📍 m2", "🗑 m1", "📌 m1", "✏️ Edit"]
    assert all(len(b.action) <= 64 for row in reply.buttons for b in row)


async def test_memory_pages_forward_and_back(core: Core) -> None:
    await remember(core, *(f"fact number {i}" for i in range(1, 24)))
    first = await run(core, "/memory")
    assert "23 items, page 1 of 3" in first.text and "Next ▶" in labels(first)
    second = await press(core, first, "Next")
    assert "page 2 of 3" in second.text and "◀ Previous" in labels(second)
    assert len([line for line in second.text.splitlines() if line.startswith("m")]) == 10
    back = await press(core, second, "◀ Previous")
    assert "page 1 of 3" in back.text
    assert "page 3 of 3" in (await run(core, "/memory 3")).text
    assert "page 3 of 3" in (await run(core, "/memory 99")).text


async def test_memory_filters_and_search(core: Core) -> None:
    await remember(core, "my dog is called Bamse", "I work at the library")
    assert "Bamse" in (await run(core, "/memory core")).text
    assert "Nothing active" in (await run(core, "/memory active")).text
    found = await run(core, "/memory library")
    assert "library" in found.text and "Bamse" not in found.text
    assert "Nothing in my memory matches" in (await run(core, "/memory zebras")).text
    assert "Bamse" in (await run(core, "/memory m1")).text


async def test_forget_by_id_removes_it_from_the_next_prompt_and_can_be_undone(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    await remember(core, "my ex is called Tom")
    await run(core, "hi")
    assert "Tom" in context_text(scripted_llm.chat_requests[-1])
    reply = await run(core, "/forget m1")
    assert "Forgotten" in reply.text and labels(reply) == ["↩ Undo"]
    await run(core, "hello again")
    assert "Tom" not in scripted_llm.last_prompt_text()
    trash = await run(core, "/memory trash")
    assert "m1 · my ex is called Tom" in trash.text
    undone = await press(core, reply, "↩ Undo")
    assert "back" in undone.text
    await run(core, "and now?")
    assert "Tom" in context_text(scripted_llm.chat_requests[-1])
    async with db() as s:
        events = await s.scalars(select(MemoryEvent).order_by(MemoryEvent.id))
        actions = [e.action for e in events]
    assert actions == ["create", "forget", "undo"]


async def test_restore_from_the_trash(core: Core) -> None:
    await remember(core, "I play the cello")
    await run(core, "/forget cello")
    trash = await run(core, "/memory trash")
    restored = await press(core, trash, "♻ Restore m1")
    assert "Restored" in restored.text
    assert "cello" in (await run(core, "/memory")).text


async def test_forget_by_text_unique_ambiguous_and_missing(core: Core) -> None:
    await remember(core, "my brother lives in Oslo", "my brother is a chef", "I like tea")
    assert "Forgotten" in (await run(core, "/forget tea")).text
    ambiguous = await run(core, "/forget brother")
    assert "Several memories match" in ambiguous.text
    assert sorted(labels(ambiguous)) == ["Forget m1", "Forget m2"]
    chosen = await press(core, ambiguous, "Forget m2")
    assert "chef" in chosen.text
    assert "Nothing in my memory matches" in (await run(core, "/forget zebras")).text


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("/forget", "Tell me what to forget"),
        ("/forget m999", "I have no memory m999"),
        ("/pin", "Tell me what to pin"),
        ("/unpin m5", "I have no memory m5"),
        ("/remember", "Tell me what to remember"),
        ("/remember " + "x" * 600, "too long"),
        ("/forget " + "y" * 300, "too long"),
        ("/timezone Atlantis", "I don't know the timezone"),
        ("/checkin 25:00", "Give me a time like"),
        ("/checkin soon", "Give me a time like"),
        ("/quiet 22:00", "Give me a range like"),
        ("/diary lots", "Use /diary"),
    ],
)
async def test_bad_arguments_get_a_clear_line_and_change_nothing(
    core: Core, db: async_sessionmaker[AsyncSession], command: str, expected: str
) -> None:
    await remember(core, "anchor fact")
    async with db() as s:
        before = (await s.scalars(select(User))).one()
    reply = await run(core, command)
    assert expected in reply.text
    async with db() as s:
        after = (await s.scalars(select(User))).one()
        memories = (await s.scalars(select(Memory))).all()
    assert (after.timezone, after.checkin_time, after.quiet_start) == (
        before.timezone,
        before.checkin_time,
        before.quiet_start,
    )
    assert [(m.content, m.status, m.pinned) for m in memories] == [("anchor fact", "active", False)]


async def test_another_persons_ids_and_buttons_are_simply_not_found(core: Core) -> None:
    await remember(core, "alice one", "alice two", "alice's secret", user="alice")
    alice_view = await run(core, "/memory", user="alice")
    await remember(core, "bob's own fact", user="bob")
    for verb in ("forget", "pin", "unpin"):
        someone_elses = await run(core, f"/{verb} m3", user="bob")
        nobodys = await run(core, f"/{verb} m9", user="bob")
        assert someone_elses.text == nobodys.text.replace("m9", "m3")
    assert "no memory m3" in (await run(core, "/memory m3", user="bob")).text
    assert "bob's own fact" in (await run(core, "/memory m1", user="bob")).text
    for label in ("🗑 m3", "📌 m3"):
        stolen = await press(core, alice_view, label, user="bob")
        assert stolen.text == STALE_BUTTON
    assert "alice's secret" in (await run(core, "/memory", user="alice")).text


async def test_forged_and_unknown_buttons(core: Core) -> None:
    for action in ("a:forged-token", "zzz", "a:" + "x" * 80, ""):
        reply = await core.router.press(ButtonPress("console", "alice", action))
        assert reply.text == STALE_BUTTON


async def test_pins_have_a_cap(core: Core) -> None:
    await remember(core, *(f"pinnable {i}" for i in range(1, 23)))
    for i in range(1, 21):
        assert "Pinned" in (await run(core, f"/pin m{i}")).text
    capped = await run(core, "/pin m21")
    assert "20 pinned memories" in capped.text and "/unpin" in capped.text
    assert "Unpinned" in (await run(core, "/unpin m1")).text
    assert "Pinned" in (await run(core, "/pin m21")).text
    assert "isn't pinned" in (await run(core, "/unpin m22")).text


async def test_remember_saves_as_you_said_with_undo(
    core: Core, db: async_sessionmaker[AsyncSession]
) -> None:
    reply = await run(core, "/remember my mother's name is Inge")
    assert labels(reply) == ["↩ Undo"]
    undone = await press(core, reply, "↩ Undo")
    assert "let go" in undone.text
    async with db() as s:
        (memory,) = (await s.scalars(select(Memory))).all()
    assert memory.source == "user" and memory.status == "forgotten"


async def test_export_holds_everything_of_the_person_and_nothing_of_others(
    core: Core,
) -> None:
    await remember(core, "I collect stamps")
    await run(core, "hello there")
    await remember(core, "bob likes jazz", user="bob")
    reply = await run(core, "/export")
    assert reply.document is not None and reply.private
    data = json.loads(reply.document.content)
    assert [m["content"] for m in data["memories"]] == ["I collect stamps"]
    # The /remember command's text is kept as her message too (the memory's source).
    assert [m["content"] for m in data["messages"]] == [
        "/remember I collect stamps",
        "hello there",
        "Tell me more.",
    ]
    assert data["settings"]["timezone"] == "UTC" and data["memory_events"]
    assert "jazz" not in reply.document.content.decode()
    assert "embedding" not in reply.document.content.decode()


async def test_settings_and_their_direct_forms(
    core: Core, clock: FakeClock, db: async_sessionmaker[AsyncSession]
) -> None:
    view = await run(core, "/settings")
    assert "Timezone: UTC" in view.text and "Daily check-in: 09:00" in view.text
    assert "Timezone set to Europe/Copenhagen" in (await run(core, "/timezone copenhagen")).text
    assert "20:30" in (await run(core, "/checkin 8:30pm")).text
    async with db() as s:
        user = (await s.scalars(select(User))).one()
    assert user.next_checkin_at is not None
    assert user.next_checkin_at.isoformat() == "2026-03-02T19:30:00+00:00"
    assert "23:00–07:00" in (await run(core, "/quiet 23:00-07:00")).text
    assert "Paused" in (await run(core, "/pause")).text
    async with db() as s:
        assert (await s.scalars(select(User))).one().next_checkin_at is None
    assert "Resumed" in (await run(core, "/resume")).text
    assert "off" in (await run(core, "/checkin off")).text
    view = await run(core, "/settings")
    assert "Daily check-in: off" in view.text
    menu = await press(core, view, "Check-in time")
    chosen = await press(core, menu, "09:00")
    assert "09:00" in chosen.text
    view = await run(core, "/settings")
    toggled = await press(core, view, "Memory notices")
    assert "Memory notices: off" in toggled.text


async def test_diary_before_there_is_one(core: Core) -> None:
    assert "No diary yet" in (await run(core, "/diary")).text


async def test_start_and_help(core: Core) -> None:
    start = await run(core, "/start")
    assert "/memory" in start.text and "/timezone" in start.text
    help_text = (await run(core, "/help")).text
    for command in ("/memory", "/forget", "/pin", "/remember", "/export", "/settings"):
        assert command in help_text
