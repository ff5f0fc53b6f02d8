"""Buttons on real PostgreSQL: each belongs to the person it was shown to, for a while.

Someone else pressing any of them — every verb the core has — gets the stale answer and
changes nothing of the owner's (not even a single-use token); a button past its time
(7 days; 10 minutes for erasing everything) is stale; a button about something that has
changed since says so and changes nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select

from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.commands.setup import PRESS_VERBS, VERBS
from bot.domain import Button, IncomingMessage, Reply
from memory.store.tables import ButtonAction, Identity, MemoryEvent
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.delivery import RecordingDelivery
from tests.fakes.extractor import RuleExtractor
from tests.integration.test_linking import CODE
from tests.support.catalog import snapshot, user_id_of
from tests.support.commands import button, press, press_action, remember, run, send_file

IMPORTS = Path(__file__).parents[1] / "data" / "imports"


async def a_notice(core: Core, clock: FakeClock, llm: ScriptedLLM) -> Reply:
    """A memory notice for Alice (an extraction pass over what she said)."""
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = RuleExtractor()
    extractor.add("violin", content="The person is learning the violin")
    llm.tools["record_memories"] = extractor
    await run(core, "/timezone UTC")  # notices wait until the timezone is known
    await run(core, "I started learning the violin")
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))
    ((_, notice),) = delivery.sent
    return notice


async def a_question(core: Core, clock: FakeClock, llm: ScriptedLLM) -> Reply:
    """Alice contradicts what she set herself (m2): the question asking to update it."""
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = RuleExtractor()
    extractor.add("steak", content="The person eats steak now", supersedes="m2")
    llm.tools["record_memories"] = extractor
    await run(core, "I eat steak these days")
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))
    ((_, question),) = delivery.sent
    return question


async def an_unsure_question(core: Core, clock: FakeClock, llm: ScriptedLLM) -> Reply:
    """Alice says something the extractor is unsure of: "Did I get this right?"."""
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = RuleExtractor()
    extractor.add("cello", content="The person may be taking up the cello", confidence=0.55)
    llm.tools["record_memories"] = extractor
    await run(core, "thinking about the cello maybe")
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))
    ((_, question),) = delivery.sent
    return question


async def a_linked_account(core: Core) -> tuple[Reply, Reply]:
    """Alice links a Telegram account (the answer, with its buttons), and asks to unlink
    it again from there (the confirmation)."""
    code = CODE.search((await run(core, "/link")).text)
    assert code is not None
    telegram = IncomingMessage("telegram", "alice-tg", f"/link {code.group(1)}", chat_id="tg")
    linked = await core.router.handle(telegram)
    return linked, await core.router.handle(replace(telegram, text="/unlink"))


async def every_kind_of_button(core: Core, clock: FakeClock, llm: ScriptedLLM) -> list[Button]:
    """Alice's replies carrying one button of each kind."""
    notice = await a_notice(core, clock, llm)
    (remembered,) = await remember(core, "my brother lives in Oslo")
    await remember(core, "my brother is a chef", *(f"fact number {i}" for i in range(1, 11)))
    await run(core, "/pin m3")
    forgotten = await run(core, "/forget m4")
    await remember(core, *(f"an old thing {i}" for i in range(1, 11)))  # m14 to m23
    for short_id in range(14, 24):
        await run(core, f"/forget m{short_id}")
    first = await run(core, "/memory")
    second = await press(core, first, "Next")
    picker = await press(core, first, "✏️ Edit")
    ambiguous = await run(core, "/forget brother")
    ambiguous_pin = await run(core, "/pin brother")
    trash = await run(core, "/memory trash")
    trash_last = await run(core, "/memory trash 2")
    settings = await run(core, "/settings")
    checkin_menu = await press(core, settings, "Check-in time")
    quiet_menu = await press(core, settings, "Quiet hours")
    timezone_menu = await press(core, settings, "Timezone")
    question = await a_question(core, clock, llm)
    unsure = await an_unsure_question(core, clock, llm)
    whose = await send_file(core, "result.json", (IMPORTS / "hostile_result.json").read_bytes())
    own = await send_file(core, "notes.txt", (IMPORTS / "notes.txt").read_bytes())
    linked, unlink = await a_linked_account(core)
    erase = await run(core, "/forget all")
    picks = [
        (notice, "↩ Undo m1"),
        (remembered, "↩ Undo"),
        (forgotten, "↩ Undo"),
        (first, "Next ▶"),
        (second, "◀ Previous"),
        (first, "🗑 m"),
        (first, "📌 m"),
        (first, "📍 m3"),
        (first, "✏️ Edit"),
        (picker, "✏️ m"),
        (ambiguous, "Forget m"),
        (ambiguous_pin, "Pin m"),
        (trash, "♻ Restore m23"),
        (trash, "Next ▶"),
        (trash_last, "♻ Restore m4"),
        (trash_last, "◀ Previous"),
        (settings, "Check-in time"),
        (settings, "Quiet hours"),
        (settings, "Timezone"),
        (settings, "Pause"),
        (settings, "Memory notices"),
        (checkin_menu, "09:00"),
        (quiet_menu, "23:00-07:00"),
        (timezone_menu, "Tokyo"),
        (question, "Yes"),
        (question, "No"),
        (unsure, "✓ Yes"),
        (whose, "Sam Rivers"),
        (whose, "Cancel"),
        (own, "Start"),
        (linked, "Check-ins on"),
        (linked, "Use Telegram's settings"),
        (unlink, "Cancel"),
        (unlink, "Unlink Telegram"),
        (erase, "Cancel"),
        (erase, "Yes"),  # last: Alice presses them in this order below
    ]
    return [button(reply, label) for reply, label in picks]


async def test_nobody_else_can_press_any_of_a_persons_buttons(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    buttons = await every_kind_of_button(core, clock, scripted_llm)
    alice = await user_id_of(core.sessions, "alice")
    async with core.sessions() as db:
        tokens = {b.action.removeprefix("a:") for b in buttons}
        verbs = set(
            await db.scalars(select(ButtonAction.verb).where(ButtonAction.token.in_(tokens)))
        )
    assert verbs == set(VERBS) | set(PRESS_VERBS), f"not exercised: {set(VERBS) - verbs}"
    await remember(core, "bob's own fact", user="bob")
    before = await snapshot(core.sessions, alice)

    for pressed in buttons:
        assert (await press_action(core, pressed.action, "bob")).text == STALE_BUTTON, pressed
    assert await snapshot(core.sessions, alice) == before

    *others, erase = buttons
    for pressed in others:  # the buttons themselves were good: Alice's all work
        assert (await press_action(core, pressed.action)).text != STALE_BUTTON, pressed.label
    assert "erased everything" in (await press_action(core, erase.action)).text


async def test_buttons_expire_after_seven_days(core: Core, clock: FakeClock) -> None:
    (first, second) = await remember(core, "I keep bees", "I collect stamps")
    alice = await user_id_of(core.sessions, "alice")
    clock.advance(days=6, hours=23)
    assert "let go" in (await press(core, first, "↩ Undo")).text
    clock.advance(hours=1, seconds=1)
    before = await snapshot(core.sessions, alice)
    assert (await press(core, second, "↩ Undo")).text == STALE_BUTTON
    assert await snapshot(core.sessions, alice) == before
    assert "m2 · I collect stamps" in (await run(core, "/memory")).text


async def test_the_erase_confirmation_expires_after_ten_minutes(
    core: Core, clock: FakeClock
) -> None:
    await remember(core, "I keep bees")
    alice = await user_id_of(core.sessions, "alice")
    late = await run(core, "/forget all")
    clock.advance(minutes=10, seconds=1)
    before = await snapshot(core.sessions, alice)
    assert (await press(core, late, "Yes")).text == STALE_BUTTON
    assert (await press(core, late, "Cancel")).text == STALE_BUTTON
    assert await snapshot(core.sessions, alice) == before

    in_time = await run(core, "/forget all")
    clock.advance(minutes=9, seconds=59)
    assert "erased everything" in (await press(core, in_time, "Yes")).text


async def test_buttons_about_an_item_forgotten_since_change_nothing(core: Core) -> None:
    (remembered,) = await remember(core, "my brother lives in Oslo")
    await remember(core, "my brother is a chef")
    listing = await run(core, "/memory")
    ambiguous = await run(core, "/forget brother")
    assert "Forgotten" in (await run(core, "/forget m1")).text
    trash = await run(core, "/memory trash")
    alice = await user_id_of(core.sessions, "alice")
    before = await snapshot(core.sessions, alice)

    for label in ("🗑 m1", "📌 m1"):
        assert "I have no memory m1" in (await press(core, listing, label)).text
    assert "I have no memory m1" in (await press(core, ambiguous, "Forget m1")).text
    assert "already undone" in (await press(core, remembered, "↩ Undo")).text
    assert await snapshot(core.sessions, alice) == before

    assert "Restored" in (await press(core, trash, "♻ Restore m1")).text
    assert "I have no memory m1" in (await press(core, trash, "♻ Restore m1")).text
    async with core.sessions() as db:
        actions = list(await db.scalars(select(MemoryEvent.action).order_by(MemoryEvent.id)))
    assert actions == ["create", "create", "forget", "restore"]


async def test_forged_buttons_and_strangers_create_nobody(core: Core) -> None:
    reply = await run(core, "/remember a fact of mine")
    (undo,) = [b.action for row in reply.buttons for b in row]
    for action in ("a:forged-token", "zzz", "a:" + "x" * 80, "", undo):
        assert (await press_action(core, action, "stranger")).text == STALE_BUTTON
    async with core.sessions() as db:
        people = list(await db.scalars(select(Identity.platform_user_id)))
    assert people == ["alice"]  # pressing made no person of the stranger
    assert "let go" in (await press(core, reply, "↩ Undo")).text
