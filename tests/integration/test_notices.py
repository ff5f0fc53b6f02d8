"""Memory notices through the core on real PostgreSQL: one notice per extraction pass,
at most eight items listed, and an Undo per item that undoes what extraction did — a
new memory is let go (its words hidden), a new version gives way to the older one."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.domain import Reply
from memory.store.tables import Memory, MemoryEvent, Message
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.delivery import RecordingDelivery
from tests.fakes.extractor import RuleExtractor
from tests.support.catalog import user_id_of
from tests.support.commands import labels, press, run

TEN_THINGS = {
    "Maja": ("The person's sister is called Maja", "relationship"),
    "Aarhus": ("The person grew up in Aarhus", "identity"),
    "nurse": ("The person works as a nurse at the city hospital", "fact"),
    "swimming": ("The person loves cold-water swimming in winter", "preference"),
    "marathon": ("The person is training for the Berlin marathon", "goal"),
    "Miso": ("The person has a ginger cat named Miso", "fact"),
    "Portuguese": ("The person speaks fluent Portuguese from years in Lisbon", "identity"),
    "peanuts": ("The person is severely allergic to peanuts", "fact"),
    "cello": ("The person plays cello in an amateur orchestra", "preference"),
    "Volvo": ("The person drives an old red Volvo estate", "fact"),
}


async def notices_after(
    core: Core, clock: FakeClock, delivery: RecordingDelivery, *lines: str
) -> list[Reply]:
    """Alice (who told her timezone: notices wait until it is known) says `lines`, the
    session goes idle and is extracted; the new notices."""
    await run(core, "/timezone UTC")
    before = len(delivery.sent)
    for line in lines:
        await run(core, line)
    clock.advance(hours=1)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))
    return [reply for _, reply in delivery.sent[before:]]


def extractor_on(llm: ScriptedLLM) -> RuleExtractor:
    """A rule-based `record_memories` answer installed on the model."""
    extractor = RuleExtractor()
    llm.tools["record_memories"] = extractor
    return extractor


async def test_undo_in_a_notice_lets_go_of_a_new_memory_and_its_words(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = extractor_on(scripted_llm)
    extractor.add("sister", content="The person's sister is Maja", category="relationship")
    extractor.add("Aarhus", content="The person grew up in Aarhus", category="identity")
    (notice,) = await notices_after(core, clock, delivery, "my sister Maja and I grew up in Aarhus")
    assert delivery.sent[0][0].chat_id == "chat-alice"
    assert "I noted:" in notice.text and "Maja" in notice.text and "Aarhus" in notice.text
    assert "more" not in notice.text
    assert labels(notice) == ["↩ Undo m1", "↩ Undo m2"]

    assert (await press(core, notice, "↩ Undo m1", user="bob")).text == STALE_BUTTON
    undone = await press(core, notice, "↩ Undo m1")
    assert "let go of “The person's sister is Maja” (m1)" in undone.text
    assert "already undone" in (await press(core, notice, "↩ Undo m1")).text
    async with core.sessions() as db:
        memories = (await db.execute(select(Memory.short_id, Memory.status))).all()
        actions = (await db.scalars(select(MemoryEvent.action).order_by(MemoryEvent.id))).all()
        said = await db.scalar(select(Message.status).where(Message.role == "user"))
    assert sorted(memories) == [(1, "forgotten"), (2, "active")]
    assert list(actions) == ["create", "create", "undo"]  # an undo of the extraction
    assert said == "forgotten"  # the words behind it are hidden too
    assert "m1 · The person's sister is Maja" in (await run(core, "/memory trash")).text


async def test_undo_in_a_notice_of_a_new_version_brings_the_older_one_back(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = extractor_on(scripted_llm)
    extractor.add("Oslo", content="The person lives in Oslo")
    extractor.add("Bergen", content="The person now lives in Bergen", supersedes="m1")
    await notices_after(core, clock, delivery, "I live in Oslo")
    (notice,) = await notices_after(core, clock, delivery, "I moved, I live in Bergen now")
    assert labels(notice) == ["↩ Undo m2"]
    alice = await user_id_of(core.sessions, "alice")
    assert [(v.label, v.live) for v in (await core.memories.history(alice, 2)).versions] == [
        ("m1", False),
        ("m2", True),
    ]

    undone = await press(core, notice, "↩ Undo m2")
    assert "Undone — “The person lives in Oslo” (m1) is back as it was." in undone.text
    shown = await run(core, "/memory")
    assert "m1 · The person lives in Oslo" in shown.text and "Bergen" not in shown.text
    await run(core, "where do I live?")
    prompt = scripted_llm.last_prompt_text()
    assert "Oslo" in prompt and "Bergen" not in prompt  # nor the words it came from
    assert "already undone" in (await press(core, notice, "↩ Undo m2")).text


async def test_a_notice_lists_eight_items_and_says_how_many_more(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor = extractor_on(scripted_llm)
    for word, (content, category) in TEN_THINGS.items():
        extractor.add(word, content=content, category=category)
    (notice,) = await notices_after(core, clock, delivery, " ".join(TEN_THINGS))
    assert await core.memories.count_live(await user_id_of(core.sessions, "alice")) == 10
    assert notice.text.count("\n• ") == 8
    assert "…and 2 more — /memory lists them." in notice.text
    assert len(labels(notice)) == 8 and all(len(row) <= 4 for row in notice.buttons)


async def test_no_notice_when_notices_are_off(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    extractor_on(scripted_llm).add("sister", content="The person's sister is Maja")
    toggled = await press(core, await run(core, "/settings"), "Memory notices")
    assert "Memory notices: off" in toggled.text
    assert await notices_after(core, clock, delivery, "my sister Maja visits") == []
    alice = await user_id_of(core.sessions, "alice")
    assert await core.memories.count_live(alice) == 1  # noted all the same
