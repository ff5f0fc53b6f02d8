"""First contact asks for the timezone on every platform, through the real platform
libraries against loopback fakes: Telegram's /start and a first plain message (buttons
from the app's language), Discord's first DM and its /start (buttons from the
interaction's locale), and the terminal (the machine's own zone first). The first
message is answered all the same, and one tap sets the zone."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import select

from adapters.console.chat import ConsoleChat
from adapters.telegram_bot import TelegramAdapter
from bot.bootstrap import Core
from bot.timezone_onboarding import QUESTION
from memory.store.tables import Identity, User
from tests.e2e.test_discord_bot import ALICE as DISCORD_ALICE
from tests.e2e.test_discord_bot import point_at, replies_in
from tests.e2e.test_discord_bot import running as discord_running
from tests.e2e.test_discord_interactions import answered, message_of
from tests.e2e.test_telegram import ALICE, BOB, running
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.integration.test_console_choices import ScriptedStdin
from tests.support.timezone_question import answer_part


async def zone_of(core: Core, platform: str, user: int | str) -> tuple[str, bool]:
    """The timezone of the person behind a platform account, and whether it is known."""
    async with core.sessions() as db:
        row = (
            await db.execute(
                select(User.timezone, User.timezone_known)
                .join(Identity, Identity.user_id == User.id)
                .where(Identity.platform == platform, Identity.platform_user_id == str(user))
            )
        ).one()
    return row.timezone, row.timezone_known


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramAPI]:
    """The fake Bot API."""
    async with FakeTelegramAPI() as api:
        yield api


@pytest.fixture
async def adapter(core: Core, telegram: FakeTelegramAPI) -> AsyncIterator[TelegramAdapter]:
    """The Telegram adapter, polling the fake."""
    async with running(core, telegram) as started:
        yield started


async def test_telegram_start_asks_with_zones_of_the_apps_language_and_a_tap_sets_one(
    adapter: TelegramAdapter, telegram: FakeTelegramAPI, core: Core
) -> None:
    telegram.set_language(ALICE, "de")
    telegram.push_message(ALICE, "/start")
    [start] = await telegram.wait_for_sent(ALICE)
    assert "which timezone are you in?" in start.text and "/memory" in start.text
    assert [label for row in start.buttons for label, _ in row][:2] == ["Berlin", "Vienna"]

    telegram.push_message(ALICE, "hallo")  # the first plain message is answered, not asked
    [_, reply] = await telegram.wait_for_sent(ALICE, 2)
    assert reply.text == "Tell me more." and reply.buttons == []

    query = telegram.push_callback(ALICE, start.action("Berlin"), start.message_id)
    await telegram.wait_for(
        lambda: any(a["callback_query_id"] == query for a in telegram.callback_answers)
    )
    await telegram.wait_for(lambda: bool(start.edits))
    assert "Timezone set to Europe/Berlin." in start.text
    assert await zone_of(core, "telegram", ALICE) == ("Europe/Berlin", True)


async def test_telegram_first_plain_message_is_answered_and_asks(
    adapter: TelegramAdapter, telegram: FakeTelegramAPI, core: Core
) -> None:
    telegram.push_message(BOB, "hi, who are you?")
    [reply] = await telegram.wait_for_sent(BOB)
    assert answer_part(reply.text) == "Tell me more."
    labels = [label for row in reply.buttons for label, _ in row]
    assert labels == ["London", "New York", "Los Angeles", "Kolkata", "Other…"]
    assert await zone_of(core, "telegram", BOB) == ("UTC", False)


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    """The fake Discord API and gateway."""
    async with FakeDiscord(heartbeat_ms=500) as api:
        yield api


async def test_discord_first_dm_is_answered_and_asks_and_a_press_sets_the_zone(
    core: Core, discord: FakeDiscord
) -> None:
    point_at(core, discord)
    async with discord_running(core, discord):
        await discord.dm(DISCORD_ALICE, "hello there")
        [reply] = await replies_in(discord, discord.dm_channel(DISCORD_ALICE))
        assert answer_part(reply.content) == "Tell me more."
        assert QUESTION in reply.content and "Other…" in reply.labels
        [custom_id] = [
            c["custom_id"]
            for row in reply.components
            for c in row["components"]
            if c["label"] == "New York"
        ]
        pressed = await discord.press(reply, custom_id, user_id=DISCORD_ALICE)
        edited = message_of((await answered(discord, pressed))[1])
        assert edited.content == "Timezone set to America/New_York."
    assert await zone_of(core, "discord", DISCORD_ALICE) == ("America/New_York", True)


async def test_discord_start_in_the_dm_uses_the_interaction_locale(
    core: Core, discord: FakeDiscord
) -> None:
    point_at(core, discord)
    async with discord_running(core, discord):
        interaction = await discord.slash("start", user_id=DISCORD_ALICE, guild=False)
        start = message_of((await answered(discord, interaction))[1])
    assert "which timezone are you in?" in start.content
    assert start.labels[:4] == ["New York", "Chicago", "Denver", "Los Angeles"]  # en-US


async def test_the_terminal_offers_the_machines_zone_first(core: Core, tmp_path: Path) -> None:
    out = io.StringIO()
    stdin = ScriptedStdin(asyncio.get_running_loop(), ["hello", "1", "/settings"])
    stdin.console = ConsoleChat(
        core, stdin=stdin, stdout=out, user="alice", downloads=tmp_path, local_zone="Europe/Oslo"
    )
    await stdin.console.run()
    printed = out.getvalue()
    assert "Tell me more." in printed and QUESTION in printed and "[1] Oslo" in printed
    assert "Timezone set to Europe/Oslo." in printed
    assert await zone_of(core, "console", "alice") == ("Europe/Oslo", True)
