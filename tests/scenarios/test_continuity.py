"""Continuity across sessions: a conversation picked up two hours later, or the next
morning, still has what was said before in the prompt, in order, with the gap marked;
a check-in answered hours later is read as the thing being answered."""

from __future__ import annotations

from datetime import date, timedelta

from tests.scenarios.harness import Person, World, assert_in_order

TUESDAY = date(2026, 10, 20)


async def test_a_conversation_resumed_after_two_hours_and_after_a_night(
    world: World, maya: Person
) -> None:
    await world.advance_to(maya.at(TUESDAY, "10:00"))
    await maya.says("/timezone Los Angeles")
    await maya.says("I'm repainting the kitchen a pale green today")
    await world.advance(minutes=1)
    await maya.says("the cat hates the smell of the paint")

    await world.advance_to(maya.at(TUESDAY, "12:01"))
    await maya.says("done! it looks amazing")
    prompt = world.last_chat_prompt(maya)
    assert_in_order(
        prompt.text,
        "I'm repainting the kitchen a pale green today",
        "the cat hates the smell of the paint",
        "— 2 hours later —",
        "done! it looks amazing",
    )

    await world.advance_to(maya.at(TUESDAY, "21:30"))
    await maya.says("going to bed, early shift tomorrow")
    await world.advance_to(maya.at(TUESDAY + timedelta(days=1), "06:45"))
    await maya.says("morning! the paint dried nicely")
    prompt = world.last_chat_prompt(maya)
    assert_in_order(
        prompt.text,
        "done! it looks amazing",
        "going to bed, early shift tomorrow",
        "— the next day —",
        "morning! the paint dried nicely",
    )


async def test_a_checkin_answered_hours_later_is_in_the_prompt_before_the_answer(
    world: World, tomas: Person
) -> None:
    await world.advance_to(tomas.at(TUESDAY, "10:00"))
    await tomas.says("/timezone Lisbon")
    await tomas.says("hi! I'm Tomás")
    wednesday = TUESDAY + timedelta(days=1)
    await world.advance_to(tomas.at(wednesday, "11:00"))
    (checkin,) = world.sent_to(tomas, proactive=True)
    assert tomas.local(checkin.at).strftime("%a %H:%M") == "Wed 09:00"

    await tomas.says("slow, I overslept and missed the studio critique")
    prompt = world.last_chat_prompt(tomas)
    assert_in_order(
        prompt.text,
        checkin.text,
        "— 2 hours later —",
        "slow, I overslept and missed the studio critique",
    )
