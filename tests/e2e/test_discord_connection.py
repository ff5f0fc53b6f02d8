"""How the Discord bot connects, end to end against the loopback gateway: the intents it
identifies with, a refused privileged intent (close code 4014) turned into a clear
`ConfigurationError`, the opt-in message content intent, and the client class each
sharding setting chooses (automatic sharding asks Discord for the shard count)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import discord
import pytest

from adapters.discord_bot import run_discord
from adapters.discord_bot.connection import build_client
from bot.bootstrap import Core
from bot.config import Settings
from bot.errors import ConfigurationError
from tests.e2e.test_discord_bot import ALICE, BOB, point_at, replies_in, running, stored
from tests.fakes.discord_api import GUILD_CHANNEL_ID, FakeDiscord
from tests.fakes.discord_gateway import MESSAGE_CONTENT, PRIVILEGED_INTENTS
from tests.support.timezone_question import plain

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


@pytest.mark.parametrize(
    ("count", "ids", "sharded", "expected_count", "expected_ids"),
    [
        (None, None, False, None, None),
        ("auto", None, True, None, None),
        (4, None, True, 4, None),
        (4, "1,3", True, 4, [1, 3]),
    ],
)
async def test_the_sharding_settings_choose_the_client(
    count: int | str | None,
    ids: str | None,
    sharded: bool,
    expected_count: int | None,
    expected_ids: list[int] | None,
) -> None:
    client = build_client(Settings(discord_shard_count=count, discord_shard_ids=ids))

    assert isinstance(client, discord.AutoShardedClient) is sharded
    shards = (client.shard_count, getattr(client, "shard_ids", None))
    assert shards == (expected_count, expected_ids)


async def test_automatic_sharding_needs_no_shard_ids() -> None:
    with pytest.raises(ConfigurationError, match="not auto"):
        build_client(Settings(discord_shard_count="auto", discord_shard_ids="0"))


async def test_automatic_sharding_runs_the_shards_discord_recommends(
    fake: FakeDiscord, core: Core
) -> None:
    fake.recommended_shards = 2
    point_at(core, fake, discord_shard_count="auto")
    stop = asyncio.Event()
    task = asyncio.create_task(run_discord(core, stop))
    await fake.wait_connected()
    await fake.dm(ALICE, "hello, automatic shards")
    [reply] = await replies_in(fake, fake.dm_channel(ALICE))

    # discord.py waits five seconds before identifying the next shard: stop meanwhile.
    stop.set()
    await asyncio.wait_for(task, 5)

    assert plain(reply.content) == "Tell me more."
    assert ("GET", "/gateway/bot") in fake.requests
    assert [identify["shard"] for identify in fake.gateway.identifies] == [[0, 2]]
    assert core.health.states()["discord"].ok is False
