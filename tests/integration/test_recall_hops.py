"""Recall that handles how people ask, on real PostgreSQL: a time the question names,
a session's summary as a unit, and a second hop that follows a name the first found."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.recall.minilm import MiniLMEmbedder
from memory.recall.retrieval import DEFAULT_TUNING, recall
from memory.store.conversations import SqlConversationStore
from memory.store.tables import Message
from tests.conftest import FakeClock
from tests.integration.test_retrieval import say

Sessions = async_sessionmaker[AsyncSession]
PLAIN = replace(
    DEFAULT_TUNING, window_weight=0.0, session_weight=0.0, unit_weight=0.0, entity_docs=0
)


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One loaded MiniLM for the module."""
    return MiniLMEmbedder()


async def history(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock, days: list[list[str]]
) -> tuple[SqlConversationStore, int, list[list[int]]]:
    """Each inner list said on its own day (one session each), oldest first, ending
    yesterday; returns the store, the person and the message ids per day."""
    store = SqlConversationStore(db, embedder)
    ids: list[list[int]] = []
    user_id = 0
    start = clock.now() - timedelta(days=len(days))
    for day, lines in enumerate(days):
        ids.append([])
        for i, line in enumerate(lines):
            at = start + timedelta(days=day, minutes=i)
            user_id, message_id = await say(store, "alice", line, at, f"{day}-{i}")
            ids[-1].append(message_id)
    return store, user_id, ids


async def test_a_time_the_question_names_favours_what_was_said_then(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    days = [["We went out for dinner at a Thai place"]] + [["I had pasta for dinner"]] * 12
    days += [["Dinner was a sushi night with friends"]]
    _, alice, ids = await history(db, embedder, clock, days)

    asked = "what did we have for dinner two weeks ago?"
    found = await recall(db, embedder, user_id=alice, query=asked, k=3, now=clock.now())
    plain = await recall(
        db, embedder, user_id=alice, query=asked, k=3, now=clock.now(), tuning=PLAIN
    )

    assert found[0].id == ids[0][0]  # said 14 days ago
    assert plain[0].id != ids[0][0]


async def test_a_matching_session_summary_lifts_the_turns_of_its_session(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    days = [
        ["It went fine in the end", "They were kind about it"],
        ["It went fine in the end", "They were kind about it"],
    ]
    store, alice, ids = await history(db, embedder, clock, days)
    first = await session_of(db, ids[0][0])
    await store.save_summary(
        user_id=alice,
        session_id=first,
        summary="Alice told of her job interview at the bakery.",
        through_id=ids[0][-1],
    )

    asked = "how did my job interview go?"
    found = await recall(db, embedder, user_id=alice, query=asked, k=4, now=clock.now())
    plain = await recall(
        db, embedder, user_id=alice, query=asked, k=4, now=clock.now(), tuning=PLAIN
    )

    # The same words were said on both days; the summary tells which day was the interview.
    assert found[0].id == ids[0][0]
    assert ids[0][1] in {r.id for r in found}  # a unit: its quieter turn comes along
    assert plain[0].id == ids[1][0]  # without it, the newer twin wins the tie


async def session_of(db: Sessions, message_id: int) -> int:
    """The session a message was stored in."""
    async with db() as s:
        row = await s.get(Message, message_id)
        assert row is not None
        return row.session_id


async def test_the_second_hop_follows_a_name_the_first_found(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    days = [
        ["My sister Anna had a baby girl, they called her Rosa!"],
        ["The twins next door are teething, poor things"],
        ["Rosa got her first passport photo taken today"],
        ["Bought a cot and a pram for the spare room"],
        ["The weather has been lovely"],
    ]
    _, alice, ids = await history(db, embedder, clock, days)

    asked = "how is my sister's new baby?"
    found = await recall(db, embedder, user_id=alice, query=asked, k=2, now=clock.now())
    plain = await recall(
        db, embedder, user_id=alice, query=asked, k=2, now=clock.now(), tuning=PLAIN
    )

    assert [r.id for r in found] == [ids[0][0], ids[2][0]]
    assert [r.id for r in plain] != [ids[0][0], ids[2][0]]


async def test_a_question_asking_for_several_things_spreads_over_sessions(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    days = [
        ["My dentist appointment is on Friday"],
        [
            "We visited Lisbon, what a city to visit",
            "Lisbon has the best city views, all the cities should have hills",
            "The city trams in Lisbon are so old, I loved visiting the city",
        ],
        ["Work has been busy this week"],
        ["Porto was lovely too"],
        ["I should water the plants"],
    ]
    _, alice, ids = await history(db, embedder, clock, days)
    asked = "which cities did I visit?"
    spread = replace(DEFAULT_TUNING, spread_decay=0.5)
    plain = replace(DEFAULT_TUNING, spread_decay=1.0)

    found = await recall(
        db, embedder, user_id=alice, query=asked, k=2, now=clock.now(), tuning=spread
    )
    bunched = await recall(
        db, embedder, user_id=alice, query=asked, k=2, now=clock.now(), tuning=plain
    )

    # Each turn arrives with its session, so the pick can leave the first one.
    assert ids[3][0] in {r.id for r in found}
    assert len({r.id for r in found} & set(ids[1])) == 1
    assert {r.id for r in bunched} <= set(ids[1])


async def test_after_an_event_favours_what_was_said_after_it_was_told(
    db: Sessions, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    days = [
        ["Went to a pottery class at the old community centre"],
        ["The weather has been lovely"],
        ["We moved into the new flat today, so many boxes"],
        ["I should water the plants"],
        ["Tried a pottery class near our place, it was fun"],
        ["Work has been busy this week"],
    ]
    _, alice, ids = await history(db, embedder, clock, days)
    asked = "what class did I go to after the move?"
    plain = replace(DEFAULT_TUNING, event_days=0.0)

    found = await recall(db, embedder, user_id=alice, query=asked, k=2, now=clock.now())
    unanchored = await recall(
        db, embedder, user_id=alice, query=asked, k=2, now=clock.now(), tuning=plain
    )

    assert found[0].id == ids[4][0]
    assert unanchored[0].id != ids[4][0]
