"""The scenario harness itself: the jobs run at the moment something falls due (not on
a coarse grid), the scenario model reads the person's words out of the real prompts,
and the assertion helpers fail on what they guard against."""

from __future__ import annotations

from datetime import date, time, timedelta

import pytest

from bot.domain import Reply
from tests.scenarios.harness import (
    Person,
    World,
    assert_in_order,
    assert_not_in_any_prompt,
    assert_nothing_sent_between,
    assert_quiet_nights,
)
from tests.scenarios.model import person_lines

TUESDAY = date(2026, 10, 20)


async def test_jobs_run_when_something_falls_due_even_on_a_coarse_grid(
    world: World, tomas: Person
) -> None:
    world.grid = timedelta(hours=6)
    await world.advance_to(tomas.at(TUESDAY, "10:00"))
    await tomas.says("/timezone Lisbon")
    await world.advance(days=2)
    times = [tomas.local(s.at).time() for s in world.sent_to(tomas, proactive=True)]
    assert times == [time(9, 0, 30), time(9, 0, 30)]  # a due time plus 30 seconds


async def test_the_model_reads_the_persons_words_from_the_real_prompts(
    world: World, aiko: Person
) -> None:
    world.model.extractor.add("bouldering", content="The person goes bouldering on Fridays")
    await world.advance_to(aiko.at(TUESDAY, "12:00"))
    await aiko.says("/timezone Tokyo")
    await aiko.says("I go bouldering on Fridays with my team")
    await world.advance(hours=1)
    (notice,) = world.sent_to(aiko, proactive=True)
    assert "The person goes bouldering on Fridays" in notice.text
    summaries = [p for p in world.model.prompts if p.tool == "write_session_summary"]
    said = person_lines(summaries[-1].request.turns[0].content)
    assert said == ["I go bouldering on Fridays with my team"], summaries[-1].text


async def test_the_assertions_fail_on_what_they_guard_against(world: World, maya: Person) -> None:
    await world.advance_to(maya.at(TUESDAY, "23:00"))
    await maya.says("/timezone Los Angeles")
    await maya.says("can't sleep, thinking about the marathon")
    user_id = await maya.user_id()
    await world.core.outbound.send(user_id, Reply("a message at night"))
    (night,) = world.sent_to(maya, proactive=True)
    assert maya.local(night.at).hour == 23

    with pytest.raises(AssertionError, match="at night"):
        assert_quiet_nights(world, maya)
    with pytest.raises(AssertionError, match="a message at night"):
        assert_nothing_sent_between(world, maya, night.at, night.at + timedelta(minutes=1))
    later = night.at + timedelta(seconds=1)
    assert_nothing_sent_between(world, maya, later, later + timedelta(days=1))
    with pytest.raises(AssertionError, match="'marathon' reached the model"):
        assert_not_in_any_prompt(world.model.prompts, "marathon")
    prompt = world.last_chat_prompt(maya)
    assert_in_order(prompt.text, "Now:", "can't sleep")
    with pytest.raises(AssertionError, match="not found"):
        assert_in_order(prompt.text, "can't sleep", "Now:")
