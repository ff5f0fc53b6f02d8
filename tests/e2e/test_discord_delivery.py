"""`DiscordDelivery`, `sync_commands` and the adapter's settings, through discord.py's
REST client against the loopback fake of Discord."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from pydantic import SecretStr
from sqlalchemy import select
from telegram.error import NetworkError

from adapters.discord_bot import DiscordDelivery, open_discord_delivery, run_discord, sync_commands
from adapters.discord_bot.connection import shard_ids
from adapters.telegram_bot.delivery import failure_for
from bot.bootstrap import Core
from bot.commands.catalog import COMMANDS
from bot.config import Settings
from bot.domain import Button, IncomingMessage, Recipient, Reply
from bot.errors import ConfigurationError, DeliveryFailed
from memory.store.tables import Identity
from tests.fakes.discord_api import TOKEN, FakeDiscord

ALICE = 310_000_000_000_000_001


def discord_route_base() -> str:
    """discord.py's REST base (imported late: the adapter imports discord.py first)."""
    from discord.http import Route

    return Route.BASE


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """The fake Discord on a loopback port."""
    async with FakeDiscord() as api:
        yield api


def settings_for(fake: FakeDiscord, **overrides: object) -> Settings:
    """Settings pointing at the fake."""
    values: dict[str, object] = {
        "discord_bot_token": SecretStr(TOKEN),
        "discord_api_base_url": fake.api_base_url,
        "discord_gateway_url": fake.gateway_url,
    }
    return Settings(**(values | overrides))  # type: ignore[arg-type]


@pytest.fixture
async def delivery(fake: FakeDiscord, core: Core) -> AsyncIterator[DiscordDelivery]:
    """A delivery on its own REST-only client (as a scheduler-only process has it)."""
    core.settings = settings_for(fake, database_url=core.settings.database_url)
    async with open_discord_delivery(core) as sender:
        yield sender
    assert discord_route_base() == "https://discord.com/api/v10"


async def alice(core: Core, fake: FakeDiscord) -> Recipient:
    """Alice has written to the companion once, so she has an identity."""
    chat_id = str(fake.dm_channel(ALICE))
    incoming = IncomingMessage("discord", str(ALICE), "hi", chat_id=chat_id)
    await core.router.handle(incoming)
    async with core.sessions() as db:
        identity = await db.scalar(select(Identity).where(Identity.platform == "discord"))
    assert identity is not None
    return Recipient(identity.user_id, "discord", str(ALICE), chat_id)


async def reachable(core: Core) -> bool:
    async with core.sessions() as db:
        return bool(await db.scalar(select(Identity.reachable)))


async def test_a_proactive_message_reaches_the_dm(
    delivery: DiscordDelivery, fake: FakeDiscord, core: Core
) -> None:
    recipient = await alice(core, fake)
    reply = Reply(
        "Good morning! How did the interview go?", buttons=((Button("Tell you", "a:1"),),)
    )

    message_id = await delivery.send(recipient, reply)

    [sent] = fake.sent_to(fake.dm_channel(ALICE))
    assert message_id == str(sent.id)
    assert sent.content == reply.text and sent.custom_ids == ["a:1"]
    assert ("POST", "/users/@me/channels") in fake.requests


async def test_a_long_message_is_split_and_the_last_id_returned(
    delivery: DiscordDelivery, fake: FakeDiscord, core: Core
) -> None:
    recipient = await alice(core, fake)
    message_id = await delivery.send(recipient, Reply("A thought. " * 500))

    sent = fake.sent_to(fake.dm_channel(ALICE))
    assert len(sent) == 3 and all(len(m.content) <= 2000 for m in sent)
    assert message_id == str(sent[-1].id)


async def test_closed_dms_mark_the_person_unreachable(
    delivery: DiscordDelivery, fake: FakeDiscord, core: Core
) -> None:
    recipient = await alice(core, fake)
    fake.closed_dms.add(ALICE)

    with pytest.raises(DeliveryFailed) as failed:
        await delivery.send(recipient, Reply("Checking in!"))

    assert failed.value.reason == "blocked" and "50007" in failed.value.detail
    assert await reachable(core) is False
    assert fake.sent_to(fake.dm_channel(ALICE)) == []


async def test_a_429_is_waited_out_and_the_message_delivered(
    delivery: DiscordDelivery, fake: FakeDiscord, core: Core
) -> None:
    recipient = await alice(core, fake)
    fake.rate_limit_sends = 1

    message_id = await delivery.send(recipient, Reply("Checking in!"))

    assert fake.rate_limited == 1
    [sent] = fake.sent_to(fake.dm_channel(ALICE))
    assert message_id == str(sent.id)


async def test_other_http_errors_are_delivery_errors(
    delivery: DiscordDelivery, fake: FakeDiscord, core: Core
) -> None:
    recipient = await alice(core, fake)
    fake.fail_sends.append((404, {"code": 10003, "message": "Unknown Channel"}))

    with pytest.raises(DeliveryFailed) as failed:
        await delivery.send(recipient, Reply("Checking in!"))

    assert failed.value.reason == "error" and "10003" in failed.value.detail
    assert await reachable(core) is True


async def test_network_and_server_trouble_fail_with_telegrams_reason(
    delivery: DiscordDelivery, fake: FakeDiscord, core: Core
) -> None:
    recipient = await alice(core, fake)
    fake.fail_sends.append((503, {"message": "503: Service Unavailable", "code": 0}))

    with pytest.raises(DeliveryFailed) as failed:
        await delivery.send(recipient, Reply("Checking in!"))

    on_telegram = failure_for(NetworkError("httpx.ConnectError: connection refused"))
    assert failed.value.reason == on_telegram.reason == "error"
    assert failed.value.detail.startswith("DiscordServerError: 503")
    assert await reachable(core) is True


async def test_sync_registers_every_catalog_command_once(fake: FakeDiscord) -> None:
    count = await sync_commands(settings_for(fake))

    assert count == len(COMMANDS)
    [synced] = fake.synced_commands
    assert [c["name"] for c in synced] == [info.name for info in COMMANDS]
    for command, info in zip(synced, COMMANDS, strict=True):
        assert command["contexts"] == [0, 1, 2] and command["integration_types"] == [0, 1]
        options = [(o["name"], o["type"], o["required"]) for o in command["options"]]
        if info.text_option is not None:  # /edit: an id and the new text, both required
            assert options == [(info.argument, 3, True), (info.text_option, 3, True)]
        else:
            assert options == ([(info.argument, 3, False)] if info.argument else [])
    assert not fake.gateway.sessions  # syncing never connects to the gateway


async def test_a_rejected_token_is_a_configuration_error(fake: FakeDiscord, core: Core) -> None:
    with pytest.raises(ConfigurationError, match="DISCORD_BOT_TOKEN"):
        await sync_commands(settings_for(fake, discord_bot_token=SecretStr("wrong")))
    core.settings = settings_for(fake, discord_bot_token=SecretStr("wrong"))
    with pytest.raises(ConfigurationError, match="DISCORD_BOT_TOKEN"):
        await run_discord(core, asyncio.Event())
    with pytest.raises(ConfigurationError, match="DISCORD_BOT_TOKEN"):
        async with open_discord_delivery(core):
            pass
    assert discord_route_base() == "https://discord.com/api/v10"


async def test_run_discord_without_a_token_says_what_to_set(core: Core) -> None:
    with pytest.raises(ConfigurationError, match="DISCORD_BOT_TOKEN"):
        await run_discord(core, asyncio.Event())


@pytest.mark.parametrize(
    ("count", "ids", "expected"),
    [(None, None, None), (4, None, None), (4, "0,1", [0, 1]), (4, " 3 , 2 ", [2, 3])],
)
def test_shard_ids_from_the_settings(count: int | None, ids: str | None, expected: object) -> None:
    settings = Settings(discord_shard_count=count, discord_shard_ids=ids)
    assert shard_ids(settings) == expected


@pytest.mark.parametrize(("count", "ids"), [(None, "0"), (2, "2"), (2, "one"), (2, "-1")])
def test_bad_shard_settings_are_configuration_errors(count: int | None, ids: str) -> None:
    with pytest.raises(ConfigurationError, match="SHARD"):
        shard_ids(Settings(discord_shard_count=count, discord_shard_ids=ids))


async def test_the_fake_rejects_overlong_content_like_discord(fake: FakeDiscord) -> None:
    url = f"{fake.api_base_url}/channels/{fake.dm_channel(ALICE)}/messages"
    headers = {"Authorization": f"Bot {TOKEN}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json={"content": "x" * 2001}, headers=headers) as response,
    ):
        body = await response.json()
    assert response.status == 400 and response.headers["Content-Type"] == "application/json"
    assert (body["code"], body["message"]) == (50035, "Invalid Form Body")
    assert "content" in body["errors"]
