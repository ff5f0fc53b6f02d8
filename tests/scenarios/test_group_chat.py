"""A group chat: the companion answers there, but the model gets no memory tool and no
memory, nothing personal is shown there, and nothing is sent there on its own."""

from __future__ import annotations

from datetime import date, timedelta

from tests.scenarios.harness import Person, World, assert_not_in_any_prompt

TUESDAY = date(2026, 10, 20)
GROUP = "group-hikers"


async def test_in_a_group_no_memory_tool_and_nothing_personal(
    world: World, maya: Person, tomas: Person
) -> None:
    world.model.extractor.add(
        "knee surgery", content="The person is recovering from knee surgery", category="fact"
    )
    await world.advance_to(maya.at(TUESDAY, "09:30"))
    await maya.says("/timezone Los Angeles")
    await maya.says("my knee surgery recovery is slow, physio twice a week")
    await tomas.says("/timezone Lisbon")
    await world.advance(hours=2)
    await maya.says("hello again")
    assert "knee surgery" in world.last_chat_prompt(maya).memory_block
    private_reply = world.last_chat_prompt(maya)
    assert "remember" in private_reply.offered_tools

    start = world.mark()
    for person, words in (
        (maya, "morning all! who's up for the hike on Saturday?"),
        (tomas, "me! remember that I'm bringing the snacks"),
        (maya, "great, remember to bring water too"),
    ):
        reply = await person.says(words, group=GROUP)
        assert reply.text and not reply.private
        await world.advance(minutes=3)
    memory_view = await maya.says("/memory", group=GROUP)
    assert memory_view.private, "a memory view is never shown in the group"

    group_prompts = [p for p in world.prompts_since(start) if p.is_chat_turn]
    assert len(group_prompts) == 3
    for prompt in group_prompts:
        assert prompt.offered_tools == (), prompt.offered_tools
        assert prompt.memory_block == "", prompt.memory_block
    assert_not_in_any_prompt(group_prompts, "knee", "physio")

    await world.advance(days=2)
    sent_there = world.sent_to_chat(GROUP, start)
    assert sent_there and not [s for s in sent_there if s.proactive]
    assert not [s.text for s in sent_there if "knee" in s.text]
    on_her_own = world.sent_to(maya, start, proactive=True)
    assert on_her_own, world.transcript(maya, start)  # her check-ins went on
    assert not [(s.chat_id, s.text) for s in on_her_own if s.chat_id != maya.chat_id]
    assert timedelta(days=2) <= world.clock.now() - start.at
