"""One platform's failure never takes the others down, in a real `companion run` with
both platforms against their loopback fakes (discord.py and python-telegram-bot, real):

- Discord events discord.py cannot parse (a button press without
  `attachment_size_limit`, a MESSAGE_CREATE without `content`) are dropped with a log
  line of their type and ids, and the connection stays up;
- a Telegram update of an unknown shape is dropped while its neighbours in the same
  getUpdates batch are answered, and python-telegram-bot's raw dump of a batch never
  reaches the log;
- a Discord client that fails anyway (a HELLO it cannot read) is restarted with backoff,
  unhealthy in `/healthz` meanwhile, while Telegram goes on answering.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.discord_api import TOKEN as DISCORD_TOKEN
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.companion_process import RunningCompanion, companion_env

ALICE_DISCORD = 310_000_000_000_000_041
BOB_TELEGRAM, CAROL_TELEGRAM = 4701, 4702
SECRET = "my secret diary words"
ANSWER_AGAIN_WITHIN = 10.0
"""The stated bound: the hit adapter answers a person again within this many seconds
(a dropped event costs nothing; a restart waits its backoff, 1 s for a first crash, then
reconnects)."""


def _env(
    tmp_path: Path,
    database_url: str,
    anthropic: FakeAnthropicAPI,
    telegram: FakeTelegramAPI,
    discord: FakeDiscord,
) -> dict[str, str]:
    return companion_env(
        data_dir=tmp_path,
        database_url=database_url,
        anthropic=anthropic,
        telegram=telegram,
        DISCORD_BOT_TOKEN=DISCORD_TOKEN,
        DISCORD_API_BASE_URL=discord.api_base_url,
        DISCORD_GATEWAY_URL=discord.gateway_url,
        COMPANION_OPS_HTTP_ENABLED="true",
        COMPANION_OPS_HTTP_PORT="0",
    )


async def _health(base: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(f"{base}/healthz") as response:
        return response.status, json.loads(await response.text())


async def _telegram_answers(telegram: FakeTelegramAPI, person: int, text: str) -> None:
    before = len(telegram.sent[person])
    telegram.push_message(person, text, first_name="Bob")
    await telegram.wait_for_sent(person, before + 1, within=ANSWER_AGAIN_WITHIN)


async def _discord_answers(discord: FakeDiscord, person: int, text: str) -> None:
    channel = discord.dm_channel(person)
    before = len(discord.sent_to(channel))
    await discord.dm(person, text)
    await discord.wait_for(
        lambda: len(discord.sent_to(channel)) > before, within=ANSWER_AGAIN_WITHIN
    )


def _events(bot: RunningCompanion, name: str) -> list[dict[str, Any]]:
    return [entry for entry in bot.logs if entry.get("event") == name]


async def test_unparsable_events_are_dropped_and_both_platforms_keep_answering(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with (
        FakeAnthropicAPI() as anthropic,
        FakeTelegramAPI() as telegram,
        FakeDiscord(heartbeat_ms=500) as discord,
    ):
        env = _env(tmp_path, database_url, anthropic, telegram, discord)
        bot = await RunningCompanion.start("run", "--no-scheduler", env=env, cwd=tmp_path)
        try:
            port = (await bot.log("ops_http.started", within=60))["port"]
            await bot.log("telegram.started", within=60)
            await discord.wait_connected(within=60)
            await _discord_answers(discord, ALICE_DISCORD, "hello")
            [first] = discord.sent_to(discord.dm_channel(ALICE_DISCORD))
            assert first.custom_ids, "the first answer offers the timezone buttons"

            # Discord: a button press and a message the library cannot parse.
            await discord.press(
                first,
                first.custom_ids[0],
                user_id=ALICE_DISCORD,
                without=("attachment_size_limit",),
            )
            await discord.dm(ALICE_DISCORD, SECRET, without=("content",))
            await _telegram_answers(telegram, BOB_TELEGRAM, "meanwhile on telegram")
            await _discord_answers(discord, ALICE_DISCORD, "still there?")

            # Telegram: an update of unknown shape between two good ones, one batch.
            telegram.push_message(BOB_TELEGRAM, "before the odd one", first_name="Bob")
            odd = telegram.push_raw(
                {"message": {"message_id": 77, "text": SECRET, "from": {"id": CAROL_TELEGRAM}}}
            )
            telegram.push_message(CAROL_TELEGRAM, "after the odd one", first_name="Carol")
            await telegram.wait_for_sent(BOB_TELEGRAM, 2, within=ANSWER_AGAIN_WITHIN)
            await telegram.wait_for_sent(CAROL_TELEGRAM, 1, within=ANSWER_AGAIN_WITHIN)
            await telegram.wait_for(lambda: odd not in telegram.pending_updates, within=5)
            await _discord_answers(discord, ALICE_DISCORD, "and now?")

            status, report = await _health(f"http://127.0.0.1:{port}")
            assert (status, report["adapters"]) == (
                200,
                {"discord": "connected", "telegram": "connected"},
            )
            assert bot.process.returncode is None
            assert len(discord.gateway.sessions) == 1 and discord.gateway.resumes == []
            code = await bot.terminate()
        finally:
            await bot.kill()
    assert code == 0, bot.stderr[-3000:]
    dropped = {
        (e["event_type"], e.get("missing_field")): e for e in _events(bot, "discord.event_dropped")
    }
    assert set(dropped) == {
        ("INTERACTION_CREATE", "attachment_size_limit"),
        ("MESSAGE_CREATE", "content"),
    }
    for entry in dropped.values():
        assert entry["level"] == "error" and entry["discord_user_id"] == str(ALICE_DISCORD)
        assert entry["id"].isdigit() and entry["channel_id"] == str(
            discord.dm_channel(ALICE_DISCORD)
        )
    [unreadable] = _events(bot, "telegram.update_unreadable")
    assert (unreadable["update_id"], unreadable["kinds"], unreadable["level"]) == (
        odd,
        ["message"],
        "error",
    )
    assert SECRET not in bot.stderr
    assert not [e for e in bot.logs if e.get("level") == "critical"]
    assert not _events(bot, "adapter.crashed")


async def test_a_crashed_adapter_restarts_while_the_other_keeps_answering(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with (
        FakeAnthropicAPI() as anthropic,
        FakeTelegramAPI() as telegram,
        FakeDiscord(heartbeat_ms=500) as discord,
    ):
        env = _env(tmp_path, database_url, anthropic, telegram, discord)
        bot = await RunningCompanion.start("run", "--no-scheduler", env=env, cwd=tmp_path)
        try:
            port = (await bot.log("ops_http.started", within=60))["port"]
            base = f"http://127.0.0.1:{port}"
            await bot.log("telegram.started", within=60)
            await discord.wait_connected(within=60)
            await _discord_answers(discord, ALICE_DISCORD, "hello")

            # The connection drops; the next two HELLOs are unreadable: discord.py's
            # client fails outside any parser, twice (restarts after 1 s, then 2 s).
            discord.gateway.bad_hellos = 2
            await discord.drop_connection()
            crashed = await bot.log("adapter.crashed", within=10)
            status, report = await _health(base)
            assert status == 503 and report["adapters"]["discord"].startswith("restarting")
            assert report["adapters"]["telegram"] == "connected"
            await _telegram_answers(telegram, BOB_TELEGRAM, "telegram is fine")

            loop = asyncio.get_running_loop()
            started = loop.time()
            await discord.wait_connected(sessions=2, within=ANSWER_AGAIN_WITHIN)
            await _discord_answers(discord, ALICE_DISCORD, "are you back?")
            assert loop.time() - started < ANSWER_AGAIN_WITHIN
            status, report = await _health(base)
            assert (status, report["adapters"]["discord"]) == (200, "connected")
            code = await bot.terminate()
        finally:
            await bot.kill()
    assert code == 0, bot.stderr[-3000:]
    assert (crashed["adapter"], crashed["error"], crashed["level"]) == (
        "discord",
        "KeyError",
        "error",
    )
    crashes = _events(bot, "adapter.crashed")
    assert [c["crashes"] for c in crashes] == [1, 2]
    assert [r["waited"] for r in _events(bot, "adapter.restarting")] == [1.0, 2.0]
