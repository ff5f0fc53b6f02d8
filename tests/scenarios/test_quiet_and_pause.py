"""Nothing proactive in quiet hours or while paused: memory notices made at night are
held and released, merged into one, when the person's window opens at 08:00; nothing at
all goes out while paused. Direct answers still go out at once."""

from __future__ import annotations

from datetime import date, timedelta

from tests.scenarios.harness import (
    Person,
    World,
    assert_nothing_sent_between,
    assert_quiet_nights,
)

TUESDAY = date(2026, 10, 20)
WEDNESDAY = TUESDAY + timedelta(days=1)


async def test_night_notices_wait_for_the_morning_merged_into_one(
    world: World, tomas: Person
) -> None:
    world.model.extractor.add(
        "cello", content="The person has started learning the cello", category="preference"
    )
    world.model.extractor.add(
        "Inês", content="The person's cousin Inês is visiting this weekend", category="relationship"
    )
    await world.advance_to(tomas.at(TUESDAY, "10:00"))
    await tomas.says("/timezone Lisbon")
    await world.advance_to(tomas.at(TUESDAY, "21:40"))
    answer = await tomas.says("I've started learning the cello, first lesson was today")
    assert answer.text  # a direct answer goes out at once, even this late
    await world.advance_to(tomas.at(TUESDAY, "23:10"))
    late = await tomas.says("can't sleep. my cousin Inês is visiting this weekend")
    assert late.text and world.sent_to(tomas)[-1].at == world.clock.now()
    await world.advance_to(tomas.at(WEDNESDAY, "08:40"))

    assert_nothing_sent_between(
        world, tomas, tomas.at(TUESDAY, "22:00"), tomas.at(WEDNESDAY, "08:00")
    )
    morning = world.sent_to(tomas, proactive=True)
    notices = [s for s in morning if "I noted" in s.text]
    assert len(notices) == 1, world.transcript(tomas)
    (notice,) = notices
    assert "learning the cello" in notice.text and "cousin Inês" in notice.text, notice.text
    assert tomas.at(WEDNESDAY, "08:00") <= notice.at < tomas.at(WEDNESDAY, "08:16")
    assert any("Undo" in label for label in notice.labels)
    assert_quiet_nights(world, tomas)


async def test_nothing_is_sent_while_paused(world: World, tomas: Person) -> None:
    world.model.extractor.add(
        "thesis deadline",
        content="The person's thesis deadline moved to December",
        category="fact",
    )
    await world.advance_to(tomas.at(TUESDAY, "10:00"))
    await tomas.says("/timezone Lisbon")
    await world.advance_to(tomas.at(WEDNESDAY, "12:00"))
    paused = await tomas.says("/pause")
    assert paused.text.startswith("Paused")
    paused_at = world.clock.now()
    answer = await tomas.says("my thesis deadline moved to December, what a relief")
    assert answer.text  # direct answers still go out while paused
    await world.advance_to(tomas.at(WEDNESDAY + timedelta(days=2), "12:00"))
    await tomas.says("how are you?")
    resumed = await tomas.says("/resume")
    assert resumed.text.startswith("Resumed")
    resumed_at = world.clock.now()

    assert_nothing_sent_between(world, tomas, paused_at, resumed_at)
    # The thesis was noted all the same: it is remembered and in mind.
    assert "thesis deadline moved to December" in world.last_chat_prompt(tomas).memory_block
    saturday = WEDNESDAY + timedelta(days=3)
    await world.advance_to(tomas.at(saturday, "10:00"))
    checkins = [
        s
        for s in world.sent_to(tomas, proactive=True)
        if s.at > resumed_at and "I noted" not in s.text
    ]
    assert [tomas.local(s.at).strftime("%a %H:%M") for s in checkins] == ["Sat 09:00"]
    assert_quiet_nights(world, tomas)
