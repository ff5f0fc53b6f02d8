"""Discord faults end to end: the real discord.py client against the loopback fake of
Discord, whose REST API answers replies with 429 and 5xx, refuses interaction callbacks
as Discord does, and whose gateway drops the connection while a turn is being answered
or replays an interaction; a whole core on the test PostgreSQL.

A dropped connection after a message was answered is covered in `test_discord_bot.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import structlog.testing

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
from tests.e2e.test_discord_interactions import answered
from tests.e2e.test_telegram import GatedLLM
from tests.fakes.discord_api import APP_ID, FakeDiscord
from tests.support.timezone_question import plain

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
    assert (plain(to_alice.content), plain(to_bob.content)) == (ANSWER, ANSWER)  # retried
    assert plain(to_carol.content) in (ANSWER, SORRY)  # never silence, never both
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
    assert [plain(m.content) for m in fake.sent_to(channel)] == [ANSWER]
    assert len(chat_requests(scripted_llm)) == 1
    assert [(m.content, m.status) for m in await stored(core)] == [
        ("tell me something while the line is bad", "answered")
    ]


async def post(fake: FakeDiscord, path: str, body: dict[str, Any]) -> tuple[int, str, Any]:
    """A raw POST to the fake's REST API: status, Content-Type header, JSON body."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{fake.api_base_url}{path}", json=body) as response,
    ):
        return response.status, response.headers["Content-Type"], await response.json()


async def test_interaction_callbacks_are_refused_as_discord_refuses_them(
    bot: None, fake: FakeDiscord
) -> None:
    interaction = await fake.slash("help", user_id=ALICE, guild=False)
    await answered(fake, interaction)
    [token] = [t for t, i in fake.interactions.items() if i == interaction]
    defer = {"type": 5}

    again = await post(fake, f"/interactions/{interaction}/{token}/callback", defer)
    forged = await post(fake, f"/interactions/{interaction}/nottherealtoken/callback", defer)
    elsewhere = await post(fake, f"/interactions/{interaction + 1}/{token}/callback", defer)
    followup = await post(fake, f"/webhooks/{APP_ID}/nottherealtoken", {"content": "hi"})

    assert again == (
        400,
        "application/json",
        {"message": "Interaction has already been acknowledged.", "code": 40060},
    )
    unknown = (404, "application/json", {"message": "Unknown interaction", "code": 10062})
    assert forged == unknown and elsewhere == unknown
    assert followup == (404, "application/json", {"message": "Unknown Webhook", "code": 10015})
    assert [code for _, code in fake.rejected] == [40060, 10062, 10062]
    assert len(fake.replies_to(interaction)) == 2  # nothing refused was recorded as sent
    fake.rejected.clear()


async def test_an_interaction_replayed_after_a_resume_is_run_once(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    interaction = await fake.slash("remember", {"text": "I like tea"}, user_id=ALICE, guild=False)
    await answered(fake, interaction)
    fake.gateway.replay_overlap = 1  # Discord sends the interaction again after RESUME

    with structlog.testing.capture_logs() as logs:
        await fake.drop_connection()
        await fake.wait_for(lambda: fake.rejected)
        await fake.quiet()

    assert fake.gateway.replayed == 1
    assert fake.rejected == [(interaction, 40060)]
    assert [r.kind for r in fake.replies_to(interaction)] == ["callback", "followup"]
    assert len(await core.memories.live(1)) == 1
    events = [entry["event"] for entry in logs]
    assert "discord.interaction_repeated" in events
    assert "discord.command_undelivered" not in events
    fake.rejected.clear()
