"""Discord faults end to end: the real discord.py client against the loopback fake of
Discord, whose REST API answers replies with 429 and 5xx and whose gateway drops the
connection while a turn is being answered; a whole core on the test PostgreSQL.

A dropped connection after a message was answered is covered in `test_discord_bot.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapters.discord_bot.messages import SORRY
from bot.bootstrap import Core
from tests.e2e.test_discord_bot import (
    ALICE,
    BOB,
    chat_requests,
    point_at,
    replies_in,
    running,
    stored,
)
from tests.e2e.test_telegram import GatedLLM
from tests.fakes.discord_api import FakeDiscord

CAROL = 310_000_000_000_000_003
ANSWER = "Tell me more."


@pytest.fixture
def scripted_llm() -> GatedLLM:
    """A model that answers only while its gate is open (open by default)."""
    return GatedLLM()


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """The fake Discord (REST and gateway) on a loopback port."""
    async with FakeDiscord(heartbeat_ms=500) as api:
        yield api


@pytest.fixture
async def bot(core: Core, fake: FakeDiscord) -> AsyncIterator[None]:
    """The adapter, running against the fake."""
    point_at(core, fake)
    async with running(core, fake):
        yield


async def test_rate_limits_and_server_errors_on_replies_deliver_one_message_each(
    bot: None, fake: FakeDiscord, core: Core, scripted_llm: GatedLLM
) -> None:
    fake.rate_limit_sends = 1
    await fake.dm(ALICE, "first, into a rate limit")
    [to_alice] = await replies_in(fake, fake.dm_channel(ALICE))
    fake.fail_sends.append((502, {"message": "502: Bad Gateway", "code": 0}))
    await fake.dm(BOB, "second, into a bad gateway")
    [to_bob] = await replies_in(fake, fake.dm_channel(BOB))
    fake.fail_sends.append((503, {"message": "503: Service Unavailable", "code": 0}))
    await fake.dm(CAROL, "third, into an outage")
    [to_carol] = await replies_in(fake, fake.dm_channel(CAROL))
    await fake.quiet()

    assert fake.rate_limited == 1 and fake.fail_sends == []
    assert (to_alice.content, to_bob.content) == (ANSWER, ANSWER)  # waited out, retried
    assert to_carol.content in (ANSWER, SORRY)  # never silence, never both
    for person in (ALICE, BOB, CAROL):
        assert len(fake.sent_to(fake.dm_channel(person))) == 1
    assert len(chat_requests(scripted_llm)) == 3
    assert [m.content for m in await stored(core)] == [
        "first, into a rate limit",
        "second, into a bad gateway",
        "third, into an outage",
    ]


async def test_a_gateway_drop_while_a_turn_is_answered_does_not_answer_twice(
    bot: None, fake: FakeDiscord, core: Core, scripted_llm: GatedLLM
) -> None:
    channel = fake.dm_channel(ALICE)
    scripted_llm.gate.clear()
    await fake.dm(ALICE, "tell me something while the line is bad")
    await fake.wait_for(lambda: channel in fake.typing)  # the turn is with the model
    fake.gateway.replay_overlap = 1  # Discord may send the in-flight event again

    await fake.drop_connection()
    await fake.wait_for(lambda: fake.gateway.resumes and fake.gateway.current.ws is not None)
    await asyncio.sleep(0.3)  # the replayed message reaches the bot
    scripted_llm.gate.set()
    await replies_in(fake, channel)
    await fake.quiet(0.5)

    assert fake.gateway.replayed >= 1
    assert [m.content for m in fake.sent_to(channel)] == [ANSWER]
    assert len(chat_requests(scripted_llm)) == 1
    assert [(m.content, m.status) for m in await stored(core)] == [
        ("tell me something while the line is bad", "answered")
    ]
