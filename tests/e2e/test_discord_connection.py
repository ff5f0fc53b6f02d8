"""How the Discord bot connects, end to end against the loopback gateway: the intents it
identifies with, a refused privileged intent (close code 4014) turned into a clear
`ConfigurationError`, and the opt-in message content intent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapters.discord_bot import run_discord
from bot.bootstrap import Core
from bot.errors import ConfigurationError
from tests.e2e.test_discord_bot import BOB, point_at, replies_in, running, stored
from tests.fakes.discord_api import GUILD_CHANNEL_ID, FakeDiscord
from tests.fakes.discord_gateway import MESSAGE_CONTENT, PRIVILEGED_INTENTS

GUILDS, GUILD_MESSAGES, DM_MESSAGES = 1 << 0, 1 << 9, 1 << 12


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """The fake Discord (REST and gateway) on a loopback port."""
    async with FakeDiscord() as api:
        yield api


async def test_the_bot_identifies_with_exactly_the_unprivileged_intents_it_needs(
    fake: FakeDiscord, core: Core
) -> None:
    point_at(core, fake)
    async with running(core, fake):
        pass

    assert fake.gateway.intents == [GUILDS | GUILD_MESSAGES | DM_MESSAGES]
    assert fake.gateway.intents[0] & PRIVILEGED_INTENTS == 0


async def test_a_refused_privileged_intent_stops_the_bot_with_a_configuration_error(
    fake: FakeDiscord, core: Core
) -> None:
    point_at(core, fake, discord_message_content=True)

    with pytest.raises(ConfigurationError, match="COMPANION_DISCORD_MESSAGE_CONTENT") as error:
        await asyncio.wait_for(run_discord(core, asyncio.Event()), 10)

    assert "developer portal" in str(error.value)
    assert fake.gateway.intents == [GUILDS | GUILD_MESSAGES | DM_MESSAGES | MESSAGE_CONTENT]
    assert fake.gateway.sessions == []  # closed at IDENTIFY, before READY
    assert core.health.states()["discord"].ok is False


async def test_with_message_content_a_reply_without_a_ping_is_read_and_answered(
    fake: FakeDiscord, core: Core
) -> None:
    fake.gateway.allowed_privileged = MESSAGE_CONTENT
    point_at(core, fake, discord_message_content=True)
    async with running(core, fake):
        await fake.guild_message(BOB, "hello", mention=True)
        [first] = await replies_in(fake, GUILD_CHANNEL_ID)
        await fake.guild_message(BOB, "and one more thing", reply_to=first, ping=False)
        [_, second] = await replies_in(fake, GUILD_CHANNEL_ID, 2)

    assert second.content == "Tell me more."
    assert [m.content for m in await stored(core)] == ["hello", "and one more thing"]
    assert fake.gateway.intents[0] & MESSAGE_CONTENT
