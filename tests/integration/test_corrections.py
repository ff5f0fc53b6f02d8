"""Corrections on real PostgreSQL with the real embedder and a scripted fast model: the
model is shown the memories relevant to what is said (not the most important ones), its
verdict decides, history is kept, a fact about someone else never replaces the person's
own, and a change to what the person set themselves is asked about once. Also the
robustness of a run: items validated one by one, cut-off answers never stored half."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from structlog.testing import capture_logs

from bot.bootstrap import Core
from memory.care.repository import SqlMemoryRepository
from memory.learning.extraction import RETRY_MAX_TOKENS, due_sessions, remember_explicit
from memory.learning.questions import answer_update
from memory.recall.minilm import MiniLMEmbedder
from memory.store.errors import AnswerTruncated
from memory.store.items import Candidate
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.delivery import RecordingDelivery
from tests.fakes.extractor import RuleExtractor
from tests.fakes.llm import FakeToolCaller, ToolRequest
from tests.fakes.quoted import person_said
from tests.integration.test_extraction import (
    CPH,
    Db,
    Pipeline,
    conversation,
    embedder,
    extract,
    llm,
    memory,
    person,
    repo,
    session_state,
)
from tests.support.catalog import user_id_of
from tests.support.commands import labels, press, run

__all__ = ["embedder", "extract", "llm", "repo"]  # fixtures shared with test_extraction

BACKGROUND = [
    "The person is training for the Copenhagen half marathon",
    "The person plays the cello in an amateur orchestra",
    "The person is afraid of flying",
    "The person's favourite band is Radiohead",
    "The person has a ginger cat named Miso",
    "The person grew up on a farm near Aarhus",
    "The person speaks fluent Portuguese",
    "The person is allergic to peanuts",
    "The person's best friend Jonas is a carpenter",
    "The person reads crime novels before bed",
]


async def with_background(repo: SqlMemoryRepository, user_id: int, copies: int = 5) -> None:
    """Many important memories, so the most important ones are not the relevant ones."""
    for round_ in range(copies):
        for text in BACKGROUND:
            content = text if round_ == 0 else f"{text} (noted {round_ + 1} times)"
            await repo.add(
                user_id,
                Candidate(content, "fact", "core", 9, 0.9),
                source="extracted",
                actor="extraction",
            )


async def low(repo: SqlMemoryRepository, user_id: int, content: str, category: str = "fact") -> Any:
    """A memory of low importance (never among the 40 most important)."""
    return await repo.add(
        user_id,
        Candidate(content, category, "core", 3, 0.8),
        source="extracted",
        actor="extraction",
    )


async def test_not_vegetarian_any_more_supersedes_is_vegetarian_with_history(
    db: Db,
    repo: SqlMemoryRepository,
    llm: FakeToolCaller,
    extract: Pipeline,
    clock: FakeClock,
    embedder: MiniLMEmbedder,
) -> None:
    alice = await person(db)
    diet = await low(repo, alice, "The person is vegetarian", "preference")
    await with_background(repo, alice)
    session_id, (said,) = await conversation(
        db, alice, [("user", "I'm not vegetarian any more, I eat fish now")], clock.now()
    )
    new = "The person is not vegetarian any more"
    vectors = await embedder.embed([new, diet.content])
    assert float(vectors[0] @ vectors[1]) >= 0.9  # as close as rewordings: no cosine rule tells

    def answer(request: ToolRequest) -> dict[str, Any]:
        assert f'<item label="{diet.label}">The person is vegetarian</item>' in request.prompt
        return {"memories": [memory(new, [said], category="preference", supersedes=diet.label)]}

    llm.script.append(answer)
    outcome = await extract(alice, session_id)

    assert (outcome.added, outcome.updated) == (0, 1)
    live = {m.content for m in await repo.live(alice, limit=100)}
    assert new in live and diet.content not in live
    history = await repo.history(alice, diet.short_id)
    assert [(v.content, v.live) for v in history.versions] == [
        (diet.content, False),
        (new, True),
    ]


async def test_no_longer_without_a_verdict_supersedes_the_same_fact(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    coffee = await low(repo, alice, "The person drinks coffee every morning", "preference")
    walk = await low(repo, alice, "The person walks the dog every morning", "preference")
    sister = await low(repo, alice, "The person's sister Ana drinks tea", "relationship")
    session_id, (said,) = await conversation(
        db, alice, [("user", "I used to drink coffee every morning, I quit")], clock.now()
    )
    new = "The person no longer drinks coffee every morning"
    llm.answer(memory(new, [said], category="preference"))  # no supersedes, no same_as

    outcome = await extract(alice, session_id)

    assert (outcome.added, outcome.updated) == (0, 1)
    live = {m.content for m in await repo.live(alice, limit=100)}
    assert live == {new, walk.content, sister.content}
    history = await repo.history(alice, coffee.short_id)
    assert [(v.content, v.live) for v in history.versions] == [
        (coffee.content, False),
        (new, True),
    ]


async def test_an_ending_about_someone_else_or_another_thing_is_new(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    await low(repo, alice, "The person drinks coffee every morning", "preference")
    await low(repo, alice, "The person's partner Sam is a vet", "relationship")
    session_id, (said,) = await conversation(
        db, alice, [("user", "Sam's clinic moved; my sister quit coffee")], clock.now()
    )
    llm.answer(
        memory(
            "The person's partner Sam's vet clinic moved to Geelong",
            [said],
            category="relationship",
        ),
        memory(
            "The person's sister no longer drinks coffee every morning",
            [said],
            category="preference",
        ),
        memory("The person no longer plays the cello", [said], category="preference"),
    )

    outcome = await extract(alice, session_id)

    assert (outcome.added, outcome.updated) == (3, 0)
    assert len(await repo.live(alice, limit=100)) == 5


async def test_an_ending_of_a_pinned_fact_is_asked_not_applied(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    mine = await remember_explicit(
        user_id=alice,
        text="I drink coffee every morning",
        memories=repo,
        llm=None,
        clock=clock,
        timezone=CPH,
    )
    session_id, (said,) = await conversation(
        db, alice, [("user", "I stopped drinking coffee in the morning")], clock.now()
    )
    llm.answer(
        memory("The person no longer drinks coffee every morning", [said], category="preference")
    )

    outcome = await extract(alice, session_id)

    (question,) = outcome.questions
    assert question.memory_label == mine.label
    assert [m.id for m in await repo.live(alice)] == [mine.id]


async def test_similarity_alone_never_drops_what_the_model_calls_new(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    diet = await low(repo, alice, "The person is vegetarian", "preference")
    session_id, (said,) = await conversation(
        db, alice, [("user", "still vegetarian, and now mostly vegan")], clock.now()
    )
    llm.answer(memory("The person is vegetarian and mostly vegan", [said], category="preference"))

    outcome = await extract(alice, session_id)

    assert outcome.added == 1
    assert {m.id for m in await repo.live(alice)} == {diet.id, outcome.items[0].id}


async def test_a_sisters_birthday_never_replaces_the_persons_own(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    own = await low(repo, alice, "The person's birthday is on 12 June")
    await with_background(repo, alice, copies=2)
    session_id, (said,) = await conversation(
        db, alice, [("user", "My sister Ana's birthday is 3 May")], clock.now()
    )
    sister = "The person's sister Ana has her birthday on 3 May"
    llm.answer(memory(sister, [said], category="relationship"))  # the model gets it right

    first = await extract(alice, session_id)
    assert (
        f'<item label="{own.label}">{own.content}</item>' in llm.last_prompt
    )  # shown, judged different
    assert first.added == 1

    wrong = "The person's sister Ana turns 30 on 3 May"
    _, (again,) = await conversation(
        db, alice, [("user", "Ana turns 30 on 3 May!")], clock.now(), session_id=session_id
    )
    llm.answer(memory(wrong, [again], category="relationship", supersedes=own.label))
    with capture_logs() as logs:
        second = await extract(alice, session_id)

    assert (second.added, second.updated) == (1, 0)
    live = {m.content for m in await repo.live(alice, limit=100)}
    assert {own.content, sister, wrong} <= live
    assert [e["memory_id"] for e in logs if e["event"] == "memory.supersede_refused"] == [own.id]


async def test_a_move_is_shown_with_the_old_city_and_supersedes_it(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    await with_background(repo, alice)
    home = await low(repo, alice, "The person lives in Copenhagen", "identity")
    job = await low(repo, alice, "The person works as a nurse at Rigshospitalet", "identity")
    session_id, (moved, quit_) = await conversation(
        db,
        alice,
        [
            ("user", "Big news: we moved to Berlin last month"),
            ("user", "and I quit the hospital, I'm teaching yoga now"),
        ],
        clock.now(),
    )

    def answer(request: ToolRequest) -> dict[str, Any]:
        remembered = request.prompt.split("<remembered>", 1)[1].split("</remembered>", 1)[0]
        assert f'<item label="{home.label}">{home.content}</item>' in remembered
        assert f'<item label="{job.label}">{job.content}</item>' in remembered
        assert len(remembered.strip().splitlines()) <= 40
        return {
            "memories": [
                memory("The person lives in Berlin", [moved], supersedes=home.label),
                memory("The person works as a yoga teacher", [quit_], supersedes=job.label),
            ]
        }

    llm.script.append(answer)
    outcome = await extract(alice, session_id)

    assert outcome.updated == 2
    live = {m.content for m in await repo.live(alice, limit=100)}
    assert "The person lives in Berlin" in live and home.content not in live
    assert "The person works as a yoga teacher" in live and job.content not in live
    assert len((await repo.history(alice, home.short_id)).versions) == 2


async def test_one_invalid_item_is_dropped_and_the_rest_stored(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    session_id, (said,) = await conversation(
        db, alice, [("user", "I'm tall, I fly to Rome on Friday and I love jazz")], clock.now()
    )
    llm.script.append(
        {
            "memories": [
                memory("The person is very tall", [said], importance=11),
                memory("The person flies to Rome", [said], event_date="next Friday"),
                {"content": "The person is tall"},
                "not an object",
                memory("The person loves jazz", [said], category="preference"),
            ]
        }
    )

    with capture_logs() as logs:
        outcome = await extract(alice, session_id)

    assert not outcome.failed
    assert [m.content for m in outcome.items] == ["The person loves jazz"]
    assert outcome.skipped == 4
    reasons = [e["reason"] for e in logs if e["event"] == "memory.candidate_invalid"]
    assert reasons == [
        "importance:less_than_equal",
        "event_date:value_error",
        "category:missing",
        "item:model_type",
    ]
    assert await session_state(db, session_id) == (said, 0, False)


def _answer_for_each_message(request: ToolRequest) -> dict[str, Any]:
    """One memory per person message in the prompt ("I like X" → "The person likes X")."""
    found = []
    for said in person_said(request.prompt):
        if said.text.startswith("I like ") and said.id is not None:
            thing = said.text.removeprefix("I like ")
            found.append(memory(f"The person likes {thing}", [said.id], category="preference"))
    return {"memories": found}


async def test_a_cut_off_answer_is_retried_and_never_stored_half(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    things = ["green tea", "jazz records", "long walks", "oil painting", "chess", "sailing"]
    session_id, ids = await conversation(
        db, alice, [("user", f"I like {thing}") for thing in things], clock.now()
    )
    llm.script.extend([AnswerTruncated("cut"), AnswerTruncated("cut"), _answer_for_each_message])

    with capture_logs() as logs:
        outcome = await extract(alice, session_id)

    assert [r.max_tokens for r in llm.requests] == [None, RETRY_MAX_TOKENS, RETRY_MAX_TOKENS]
    assert f'<message id="{ids[5]}"' in llm.requests[1].prompt  # more room, the same window
    assert (
        f'<message id="{ids[2]}"' in llm.last_prompt
        and f'<message id="{ids[3]}"' not in llm.last_prompt
    )
    assert sorted(m.content for m in outcome.items) == [
        "The person likes green tea",
        "The person likes jazz records",
        "The person likes long walks",
    ]
    assert [e["next_window"] for e in logs if e["event"] == "memory.extraction_truncated"] == [6, 3]
    assert await session_state(db, session_id) == (ids[2], 0, True)  # the rest is still due
    assert await due_sessions(db, every_n=8) == [(alice, session_id)]

    llm.script.append(_answer_for_each_message)
    rest = await extract(alice, session_id)
    assert (
        f'<message id="{ids[2]}"' not in llm.last_prompt
        and f'<message id="{ids[5]}"' in llm.last_prompt
    )
    assert rest.added == 3 and await repo.count_live(alice) == 6
    assert await session_state(db, session_id) == (ids[5], 0, False)


async def test_an_answer_cut_off_every_time_stores_nothing_and_moves_nothing(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    session_id, _ = await conversation(
        db, alice, [("user", "I like tea"), ("user", "I like jazz")], clock.now()
    )
    llm.default = AnswerTruncated("cut")

    outcome = await extract(alice, session_id)

    assert outcome.failed and await repo.count_live(alice) == 0
    assert len(llm.requests) == 3  # full window, with more room, then one message: still cut
    assert await session_state(db, session_id) == (None, 1, False)


async def test_a_contradicted_explicit_memory_is_asked_about_once(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice = await person(db)
    mine = await remember_explicit(
        user_id=alice, text="I am vegetarian", memories=repo, llm=None, clock=clock, timezone=CPH
    )
    proposal = memory("The person eats meat now", [0], category="preference", supersedes="m1")
    outcomes = []
    session_id = None
    for line in ("I eat meat now", "yes, meat again these days"):
        session_id, (said,) = await conversation(
            db, alice, [("user", line)], clock.now(), session_id=session_id
        )
        llm.answer(proposal | {"evidence_message_ids": [said]})
        outcomes.append(await extract(alice, session_id))

    (question,) = outcomes[0].questions
    assert outcomes[1].questions == ()  # the same proposal is not put twice
    assert (question.memory_label, question.old, question.new) == (
        "m1",
        "I am vegetarian",
        "The person eats meat now",
    )
    assert [m.id for m in await repo.live(alice)] == [mine.id]  # nothing changed yet

    kept = await answer_update(db, repo, user_id=alice, question_id=question.id, accept=False)
    assert (kept.result, kept.item and kept.item.id) == ("declined", mine.id)
    again = await answer_update(db, repo, user_id=alice, question_id=question.id, accept=True)
    assert again.result == "already"
    assert [m.id for m in await repo.live(alice)] == [mine.id]


async def test_yes_makes_the_new_words_the_pinned_memory_with_history(
    db: Db, repo: SqlMemoryRepository, llm: FakeToolCaller, extract: Pipeline, clock: FakeClock
) -> None:
    alice, bob = await person(db), await person(db)
    city = await low(repo, alice, "The person lives in Copenhagen", "identity")
    await repo.pin(alice, city.short_id, limit=5)
    session_id, (said,) = await conversation(
        db, alice, [("user", "I live in Aarhus now")], clock.now()
    )
    llm.answer(memory("The person lives in Aarhus", [said], supersedes=city.label))
    (question,) = (await extract(alice, session_id)).questions

    stranger = await answer_update(db, repo, user_id=bob, question_id=question.id, accept=True)
    assert stranger.result == "stale"
    answered = await answer_update(db, repo, user_id=alice, question_id=question.id, accept=True)

    assert answered.result == "accepted" and answered.item is not None
    new = answered.item
    assert (new.content, new.source, new.pinned, new.confidence) == (
        "The person lives in Aarhus",
        "user",
        True,
        1.0,
    )
    assert new.source_message_ids == (said,)
    assert [m.id for m in await repo.live(alice)] == [new.id]
    versions = (await repo.history(alice, city.short_id)).versions
    assert [v.content for v in versions] == [city.content, new.content]


async def test_the_question_reaches_the_person_with_yes_and_no(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    delivery = RecordingDelivery()
    core.outbound.register(delivery)
    await run(core, "/timezone UTC")  # questions, like notices, wait for a known timezone
    await run(core, "/remember I am vegetarian")
    await run(core, "/pin m1")
    extractor = RuleExtractor()
    extractor.add("meat", content="The person eats meat now", supersedes="m1")
    scripted_llm.tools["record_memories"] = extractor

    async def say(line: str) -> list[Any]:
        before = len(delivery.sent)
        await run(core, line)
        clock.advance(hours=1)
        await core.memory.sweep(idle_gap=timedelta(minutes=30))
        return [reply for _, reply in delivery.sent[before:]]

    (question,) = await say("I eat meat now")
    assert question.text == (
        "You told me “I am vegetarian” (m1); now you said “The person eats meat now” — update it?"
    )
    assert labels(question) == ["Yes, update it", "No, keep it"] and question.private
    assert await say("meat is fine for me") == []  # the same proposal: not asked again

    updated = await press(core, question, "Yes")
    assert "Updated — I'll remember: “The person eats meat now” (m2)" in updated.text
    assert "already answered" in (await press(core, question, "No")).text
    shown = await run(core, "/memory")
    assert "The person eats meat now" in shown.text and "I am vegetarian" not in shown.text
    alice = await user_id_of(core.sessions, "alice")
    assert [v.content for v in (await core.memories.history(alice, 1)).versions] == [
        "I am vegetarian",
        "The person eats meat now",
    ]


async def test_a_close_memory_the_prompt_did_not_show_is_judged_by_a_second_call(
    db: Db,
    repo: SqlMemoryRepository,
    llm: FakeToolCaller,
    extract: Pipeline,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("memory.learning.extraction.KNOWN_IN_PROMPT", 0)  # a prompt that shows none
    alice = await person(db)
    diet = await low(repo, alice, "The person is vegetarian", "preference")
    session_id, (said,) = await conversation(
        db, alice, [("user", "not vegetarian any more! Ana still is. I love jazz")], clock.now()
    )
    llm.answer(
        memory("The person is not vegetarian any more", [said], category="preference"),
        memory("The person's sister Ana is vegetarian", [said], category="relationship"),
        memory("The person loves listening to jazz", [said], category="preference"),
    )
    llm.script.append(
        {
            "verdicts": [
                {"statement": 1, "verdict": "update", "memory": diet.label},
                {"statement": 2, "verdict": "new", "memory": None},
                {"statement": 3, "verdict": "same", "memory": "m99"},  # not shown: ignored
            ]
        }
    )

    outcome = await extract(alice, session_id)

    extraction, judge = llm.requests
    assert "(nothing yet)" in extraction.prompt
    assert judge.tool_name == "judge_memories"
    assert (
        '<statement number="1">The person is not vegetarian any more</statement>\n'
        f'<remembered>\n<item label="{diet.label}">'
    ) in judge.prompt
    assert "jazz" not in judge.prompt  # close to nothing remembered: not asked about
    assert (outcome.added, outcome.updated) == (2, 1)
    live = {m.content for m in await repo.live(alice)}
    assert live == {
        "The person is not vegetarian any more",
        "The person's sister Ana is vegetarian",
        "The person loves listening to jazz",
    }
