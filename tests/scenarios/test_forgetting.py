"""Forgetting that sticks: a memory forgotten with /forget, and the words it came from,
never reach the model again: not in a reply's prompt, a recall, a session summary, the
diary, its notes to self or a check-in. Whatever made the memory: extraction, or the chat
model's `remember` tool."""

from __future__ import annotations

from datetime import date, timedelta

from tests.scenarios.harness import (
    Person,
    World,
    assert_not_in_any_prompt,
    find_button,
    memory_labels,
)

TUESDAY = date(2026, 10, 20)


async def _live_two_days(world: World, person: Person, start: date) -> None:
    """Two more days of ordinary life: chats, the nightly diary, check-ins answered."""
    await world.advance(minutes=3)
    await person.says("what should I cook tonight? something with lentils maybe")
    for day in (start + timedelta(days=1), start + timedelta(days=2)):
        await world.advance_to(person.at(day, "13:00"))
        await person.says("slept well for once, the lentil soup was great")
        await world.advance(minutes=2)
        await person.says("anyway, back to the studio project")
    await world.advance_to(person.at(start + timedelta(days=3), "10:00"))


async def test_a_forgotten_extracted_memory_leaves_no_trace(world: World, tomas: Person) -> None:
    world.model.extractor.add(
        "architecture", content="The person studies architecture at Técnico", category="identity"
    )
    world.model.extractor.add(
        "Rafael",
        content="The person's ex, Rafael, keeps texting them late at night",
        category="relationship",
    )
    await world.advance_to(tomas.at(TUESDAY, "10:00"))
    await tomas.says("/timezone Lisbon")
    await tomas.says("I'm Tomás, I study architecture at Técnico")
    await world.advance(minutes=2)
    await tomas.says("honestly my ex Rafael keeps texting me late at night and it wrecks my sleep")
    await world.advance(hours=2)
    await tomas.says("hey again")
    block = world.last_chat_prompt(tomas).memory_block
    assert "Rafael" in block and "architecture at Técnico" in block, block

    listing = await tomas.says("/memory")
    (label,) = memory_labels(listing.text, "Rafael")
    forgotten = await tomas.says(f"/forget {label}")
    assert forgotten.text.startswith("Forgotten:") and find_button(forgotten, "Undo")
    after = world.mark()

    await _live_two_days(world, tomas, TUESDAY)
    diary = await tomas.says("/diary")
    await tomas.says("good morning")

    prompts = world.prompts_since(after)
    kinds = {p.tool for p in prompts}
    assert {None, "record_memories", "write_session_summary", "write_diary"} <= kinds, kinds
    assert "decide_checkin" in kinds, kinds
    assert_not_in_any_prompt(prompts, "Rafael", "texting me late")
    assert "architecture at Técnico" in world.last_chat_prompt(tomas).memory_block
    assert "lentil" in diary.text, diary.text  # the diary was written from those days
    for sent in world.sent_to(tomas, after):
        assert "Rafael" not in sent.text, world.transcript(tomas, after)


async def test_a_memory_the_chat_tool_saved_is_forgotten_with_its_words(
    world: World, maya: Person
) -> None:
    await world.advance_to(maya.at(TUESDAY, "10:00"))
    await maya.says("/timezone Los Angeles")
    world.model.next_turn_calls(
        "remember",
        {"text": "The person's therapist is Dr. Okonkwo, seen on Tuesdays"},
        then="Noted — I'll remember Dr. Okonkwo.",
    )
    reply = await maya.says(
        "please remember that my therapist is Dr. Okonkwo and I see her on Tuesdays"
    )
    answer, notice = reply.text.split("\n\n", 1)
    assert answer == "Noted — I'll remember Dr. Okonkwo."
    assert notice.startswith("Memory changes I made just now:\n• Saved: “The person's therapist")
    offered = world.last_chat_prompt(maya)
    assert "remember" in offered.offered_tools
    await world.advance(hours=2)
    await maya.says("long shift today")
    assert "Dr. Okonkwo" in world.last_chat_prompt(maya).memory_block

    listing = await maya.says("/memory")
    (label,) = memory_labels(listing.text, "Okonkwo")
    forgotten = await maya.says(f"/forget {label}")
    assert forgotten.text.startswith("Forgotten:")
    after = world.mark()

    await _live_two_days(world, maya, TUESDAY)
    diary = await maya.says("/diary")
    await maya.says("do you remember who I see on Tuesdays?")

    prompts = world.prompts_since(after)
    kinds = {p.tool for p in prompts}
    assert {None, "write_session_summary", "write_diary", "decide_checkin"} <= kinds, kinds
    # "therapist" alone is in the persona ("not a therapist"); her words are "my therapist".
    assert_not_in_any_prompt(prompts, "Okonkwo", "my therapist")
    assert "lentil" in diary.text, diary.text
    for sent in world.sent_to(maya, after):
        assert "Okonkwo" not in sent.text, world.transcript(maya, after)
