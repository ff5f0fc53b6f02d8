"""Corrections are updates, never duplicates: a changed diet, a move, a new job each end
with exactly the new fact in the prompt and the old one kept only as history; a sister's
birthday never replaces the person's own; contradicting what the person set explicitly
is asked about once, with Yes/No buttons."""

from __future__ import annotations

import re
from datetime import date, timedelta

from sqlalchemy import select

from memory.store.tables import Memory
from tests.scenarios.harness import Person, World, memory_labels

MONDAY = date(2026, 10, 19)


async def _rows(world: World, person: Person) -> list[Memory]:
    user_id = await person.user_id()
    async with world.core.sessions() as db:
        query = select(Memory).where(Memory.user_id == user_id).order_by(Memory.id)
        return list((await db.scalars(query)).all())


async def _introduce(world: World, person: Person, city: str) -> None:
    await world.advance_to(person.at(MONDAY + timedelta(days=1), "10:00"))
    await person.says(f"/timezone {city}")


async def _then_later(world: World, person: Person, days: int, words: str) -> None:
    """`days` later at noon (their time) they say `words`; the session is then left to
    close and be extracted."""
    await world.advance_to(person.at(person.today() + timedelta(days=days), "12:00"))
    await person.says(words)
    await world.advance(hours=2)


async def _assert_replaced(world: World, person: Person, *, old: str, new: str, ask: str) -> None:
    """In the next reply's prompt the memory block holds `new` once and `old` not at all;
    /memory lists only `new`; the old row is kept as history, superseded by the new."""
    await person.says(ask)
    block = world.last_chat_prompt(person).memory_block
    assert block.count(new) == 1 and old not in block, block
    listing = (await person.says("/memory")).text
    assert memory_labels(listing, new) and not memory_labels(listing, old), listing
    rows = {row.content: row for row in await _rows(world, person)}
    assert old in rows and new in rows, list(rows)
    assert rows[old].valid_until is not None and rows[old].superseded_by == rows[new].id
    assert rows[new].valid_until is None and rows[new].status == "active"


async def test_no_longer_vegetarian_replaces_vegetarian(world: World, aiko: Person) -> None:
    world.model.extractor.add(
        r"\bI'm vegetarian", content="The person is vegetarian", category="preference"
    )
    world.model.extractor.add(
        r"not vegetarian any more",
        content="The person is no longer vegetarian",
        category="preference",
        supersedes="The person is vegetarian",
    )
    await _introduce(world, aiko, "Tokyo")
    await _then_later(world, aiko, 0, "I'm vegetarian, have been for years")
    await _then_later(world, aiko, 2, "I'm not vegetarian any more, I started eating fish again")
    await _assert_replaced(
        world,
        aiko,
        old="The person is vegetarian",
        new="The person is no longer vegetarian",
        ask="what should I make for dinner tonight?",
    )


async def test_moving_city_replaces_the_old_home(world: World, maya: Person) -> None:
    world.model.extractor.add(
        r"live in Santa Monica", content="The person lives in Santa Monica", category="identity"
    )
    world.model.extractor.add(
        r"moved to Pasadena",
        content="The person lives in Pasadena",
        category="identity",
        supersedes="The person lives in Santa Monica",
    )
    await _introduce(world, maya, "Los Angeles")
    await _then_later(world, maya, 0, "I live in Santa Monica, five minutes from the beach")
    await _then_later(world, maya, 3, "we finally moved to Pasadena last weekend, boxes everywhere")
    await _assert_replaced(
        world,
        maya,
        old="The person lives in Santa Monica",
        new="The person lives in Pasadena",
        ask="any tips for meeting people in a new neighbourhood?",
    )


async def test_a_new_job_replaces_the_old_one(world: World, maya: Person) -> None:
    world.model.extractor.add(
        r"nurse at St\. Vincent",
        content="The person works as a nurse at St. Vincent's hospital",
        category="identity",
    )
    world.model.extractor.add(
        r"start at Cedars",
        content="The person works as a nurse at the Cedars clinic",
        category="identity",
        supersedes="The person works as a nurse at St. Vincent's hospital",
    )
    await _introduce(world, maya, "Los Angeles")
    await _then_later(world, maya, 0, "I'm a nurse at St. Vincent's, nights mostly")
    await _then_later(world, maya, 2, "I quit St. Vincent's! I start at Cedars clinic on Monday")
    await _assert_replaced(
        world,
        maya,
        old="The person works as a nurse at St. Vincent's hospital",
        new="The person works as a nurse at the Cedars clinic",
        ask="first day tomorrow, any advice?",
    )


async def test_a_sisters_birthday_never_replaces_the_persons_own(
    world: World, aiko: Person
) -> None:
    own = "The person's birthday is 12 March"
    sister = "The person's sister Yui's birthday is 3 May"
    world.model.extractor.add(r"my birthday is 12 March", content=own, category="fact")
    world.model.extractor.add(r"sister Yui's birthday", content=sister, category="fact")
    await _introduce(world, aiko, "Tokyo")
    await _then_later(world, aiko, 0, "fun fact: my birthday is 12 March")
    await _then_later(world, aiko, 1, "my sister Yui's birthday is 3 May, I need a gift idea")
    await aiko.says("what could I get her?")
    block = world.last_chat_prompt(aiko).memory_block
    assert block.count(own) == 1 and block.count(sister) == 1, block
    rows = await _rows(world, aiko)
    assert sorted((r.content, r.valid_until is None) for r in rows) == [
        (own, True),
        (sister, True),
    ]


async def test_contradicting_what_was_set_explicitly_asks_once(world: World, tomas: Person) -> None:
    explicit = "I'm allergic to peanuts"
    new = "The person is not allergic to peanuts (the allergy test was negative)"
    world.model.extractor.add(r"allergy test", content=new, category="fact", supersedes=explicit)
    await _introduce(world, tomas, "Lisbon")
    saved = await tomas.says(f"/remember {explicit}")
    assert saved.text.startswith("Got it"), saved.text
    before = world.mark()
    await _then_later(
        world, tomas, 1, "good news, the allergy test was negative, no peanut allergy at all"
    )
    questions = [s for s in world.sent_to(tomas, before) if "update it?" in s.text]
    assert len(questions) == 1, world.transcript(tomas, before)
    (question,) = questions
    assert "peanuts" in question.text and "negative" in question.text, question.text
    assert re.search(r"You told me .+; now you said .+ — update it\?", question.text, re.DOTALL)
    labels = question.labels
    assert any(x.startswith("Yes") for x in labels) and any(x.startswith("No") for x in labels)

    await tomas.says("also the studio review went fine")
    await world.advance(hours=2)
    assert len([s for s in world.sent_to(tomas, before) if "update it?" in s.text]) == 1

    await tomas.press(question, "Yes")
    await tomas.says("so, peanut butter toast for breakfast?")
    block = world.last_chat_prompt(tomas).memory_block
    assert new in block and explicit not in block, block
    listing = (await tomas.says("/memory")).text
    assert memory_labels(listing, new) and not memory_labels(listing, explicit), listing


async def test_used_to_without_a_hint_from_the_model_still_supersedes(
    world: World, aiko: Person
) -> None:
    """The extraction model does not say what the correction replaces: reconcile must
    find the old fact itself ("used to", a negation) and never drop the candidate as a
    near-duplicate of what it corrects."""
    world.model.extractor.add(
        r"\bI drink coffee", content="The person drinks coffee every morning", category="preference"
    )
    world.model.extractor.add(
        r"used to drink coffee",
        content="The person no longer drinks coffee every morning",
        category="preference",
    )
    await _introduce(world, aiko, "Tokyo")
    await _then_later(world, aiko, 0, "I drink coffee every morning, two cups")
    await _then_later(world, aiko, 2, "I used to drink coffee every morning, I quit last week")
    await _assert_replaced(
        world,
        aiko,
        old="The person drinks coffee every morning",
        new="The person no longer drinks coffee every morning",
        ask="I'm so sleepy today",
    )
