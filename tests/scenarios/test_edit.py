"""/edit: correcting a memory in place of forgetting and restating it. `/edit m1 <text>`
and the Edit button on /memory; the edit supersedes (history kept), keeps the pin,
counts as the person's own words, and has Undo. Bad ids, someone else's id and empty
text get a clear message and change nothing."""

from __future__ import annotations

from datetime import date, timedelta

from sqlalchemy import select

from bot.domain import Button, Reply
from memory.store.tables import Memory
from tests.scenarios.harness import Person, World, buttons_of, memory_labels

TUESDAY = date(2026, 10, 20)
OLD = "The person works at Sony as a firmware engineer"
NEW = "Works at Nintendo as a firmware engineer"
NEWER = "Works at Nintendo as a senior firmware engineer"


def edit_button(listing: Reply, label: str) -> Button:
    """The Edit button containing `label` under a reply (a label with 'Edit' or '✏'):
    "Edit" finds the one under /memory, "m1" the item's button in the picker."""
    found = [
        b
        for b in buttons_of(listing)
        if label in b.label and ("edit" in b.label.lower() or "✏" in b.label)
    ]
    assert found, f"no Edit button for {label} among {[b.label for b in buttons_of(listing)]}"
    return found[0]


async def _rows(world: World, person: Person) -> list[Memory]:
    user_id = await person.user_id()
    async with world.core.sessions() as db:
        query = select(Memory).where(Memory.user_id == user_id).order_by(Memory.id)
        return list((await db.scalars(query)).all())


async def _memory(person: Person) -> str:
    return (await person.says("/memory")).text


async def test_edit_with_undo_keeps_the_pin_and_counts_as_their_words(
    world: World, aiko: Person, maya: Person
) -> None:
    world.model.extractor.add("firmware at Sony", content=OLD, category="identity")
    world.model.extractor.add(
        "Pasadena", content="The person lives in Pasadena", category="identity"
    )
    world.model.extractor.add(
        "cat Miso", content="The person has a cat named Miso", category="fact"
    )
    await world.advance_to(maya.at(TUESDAY - timedelta(days=1), "10:00"))
    await maya.says("/timezone Los Angeles")
    await maya.says("I live in Pasadena with my cat Miso")
    await world.advance_to(aiko.at(TUESDAY, "10:00"))
    await aiko.says("/timezone Tokyo")
    await aiko.says("I do firmware at Sony, mostly camera modules")
    await world.advance(hours=2)

    (label,) = memory_labels(await _memory(aiko), OLD)
    pinned = await aiko.says(f"/pin {label}")
    assert pinned.text.startswith("📌 Pinned"), pinned.text
    unchanged = await _memory(aiko)

    # Bad input: a clear message each (from the command, not the model), nothing changes.
    maya_listing = await _memory(maya)
    for bad in ("/edit", f"/edit {label}", "/edit m99 Works at Nintendo", f"/edit {label}    "):
        asked_before = len(world.chat_prompts(aiko))
        answer = await aiko.says(bad)
        assert answer.text.strip(), bad
        assert len(world.chat_prompts(aiko)) == asked_before, bad
        assert await _memory(aiko) == unchanged
    # Someone else's memory: Maya's labels that Aiko has no memory under.
    theirs = [m for m in memory_labels(maya_listing, "") if m != label]
    assert theirs, maya_listing
    answer = await aiko.says(f"/edit {theirs[0]} Lives in Kyoto")
    assert answer.text.strip() and "Kyoto" not in await _memory(maya)
    assert await _memory(maya) == maya_listing and await _memory(aiko) == unchanged

    edited = await aiko.says(f"/edit {label} {NEW}")
    assert NEW in edited.text and any("Undo" in b.label for b in buttons_of(edited))
    await aiko.says("long day of debugging")
    block = world.last_chat_prompt(aiko).memory_block
    assert NEW in block and OLD not in block, block
    # Within the session a change shows in the turn's part of the memory (the standing,
    # cached part stays as the session began); from the next session on it stands pinned.
    await world.advance(hours=3)
    await aiko.says("back again")
    block = world.last_chat_prompt(aiko).memory_block
    assert NEW in block and OLD not in block, block
    assert "## Pinned" in block, block
    pinned_part = block.split("## Pinned", 1)[1].split("## ", 1)[0]
    assert NEW in pinned_part, block
    rows = {row.content: row for row in await _rows(world, aiko)}
    assert rows[OLD].superseded_by == rows[NEW].id and rows[OLD].valid_until is not None
    assert rows[NEW].valid_until is None and rows[NEW].pinned
    listing = await _memory(aiko)
    (line,) = [x for x in listing.splitlines() if NEW in x]
    assert "you said" in line and OLD not in listing, listing
    assert listing.index("📌 Pinned") < listing.index(NEW)

    undone = await aiko.press(edited, "Undo")
    assert "Undone" in undone.text, undone.text
    await aiko.says("ok, back to work")
    block = world.last_chat_prompt(aiko).memory_block
    assert OLD in block and NEW not in block, block

    # The Edit button under /memory opens a picker (one "✏️ m1" per item, within
    # Discord's 25-button limit); the item's button asks for the new text; the next
    # message is it.
    listing_reply = await aiko.says("/memory")
    (label,) = memory_labels(listing_reply.text, OLD)
    picker = await aiko.press(listing_reply, edit_button(listing_reply, "Edit").label)
    button = edit_button(picker, label)
    asked = await aiko.press(picker, button.label)
    assert asked.text, "pressing Edit should ask for the new text"
    await aiko.says(NEWER)
    await aiko.says("what do you know about my job?")
    block = world.last_chat_prompt(aiko).memory_block
    assert NEWER in block and OLD not in block, block
