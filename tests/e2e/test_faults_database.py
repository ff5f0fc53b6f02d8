"""PostgreSQL restarted under a running bot: the real python-telegram-bot against the
loopback Bot API, a whole core on a PostgreSQL of this test's own (the shared test
database is left alone), stopped and started again while people keep writing.

Messages that arrive during the outage must not be lost: Telegram keeps an update until
a later getUpdates confirms it (polling) or a webhook call for it is answered with 200,
so the bot has to store a message before it confirms it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from bot.bootstrap import Core, build_core
from bot.config import Settings
from memory.store.database import EmbeddedPostgres, start_embedded
from memory.store.tables import Message
from tests.e2e.test_telegram import running
from tests.e2e.test_telegram_lifecycle import free_port
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.timezone_question import plain

ALICE, BOB = 6001, 6002
ANSWER = "Tell me more."


class RestartableDatabase:
    """An embedded PostgreSQL in its own directory that the test can stop and start."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.server: EmbeddedPostgres | None = None

    async def start(self) -> str:
        """Start it (again); its URL."""
        self.server = await asyncio.to_thread(start_embedded, self.data_dir)
        return self.server.url

    async def stop(self) -> None:
        """Stop it, as an operator restarting the database would."""
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)
            self.server = None


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[RestartableDatabase]:
    """This test's own PostgreSQL, stopped at the end."""
    own = RestartableDatabase(tmp_path / "pg")
    try:
        yield own
    finally:
        await own.stop()


@pytest.fixture
async def core(database: RestartableDatabase, tmp_path: Path) -> AsyncIterator[Core]:
    """A whole core on that database, with a scripted model and the real clock."""
    url = await database.start()
    settings = Settings(database_url=url, data_dir=tmp_path, burst_window_seconds=0.05)
    built = await build_core(settings, llm=ScriptedLLM())
    yield built
    await built.aclose()


def handed_out(fake: FakeTelegramAPI) -> set[int]:
    """Ids of every update a getUpdates call has returned."""
    return {update for call in fake.get_updates_calls for update in call.returned}


async def user_messages(core: Core) -> list[tuple[int, str, str]]:
    """(chat id, platform message id, status) of every stored message of a person."""
    async with core.sessions() as db:
        rows = await db.scalars(select(Message).where(Message.role == "user").order_by(Message.id))
        return [(int(m.chat_id or 0), m.platform_message_id or "", m.status) for m in rows]


async def eventually_stored(core: Core, count: int, within: float) -> list[tuple[int, str, str]]:
    """The stored messages once `count` are answered, or whatever is there after `within`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:  # the database has no event to wait on: poll it
        try:
            found = await user_messages(core)
        except Exception:  # still reconnecting
            found = []
        if [s for *_, s in found].count("answered") >= count or loop.time() > deadline:
            return found
        await asyncio.sleep(0.1)


def assert_all_kept_and_answered(
    stored: list[tuple[int, str, str]], pushed: list[tuple[int, int]]
) -> None:
    """Every message pushed is stored once, and answered."""
    assert sorted((chat, message_id) for chat, message_id, _ in stored) == sorted(
        (chat, str(message_id)) for chat, message_id in pushed
    ), "a message that arrived during the outage was lost"
    assert {status for *_, status in stored} == {"answered"}


async def test_a_database_restart_loses_no_message_and_the_bot_reconnects(
    core: Core, database: RestartableDatabase
) -> None:
    url = core.settings.database_url
    async with FakeTelegramAPI() as fake, running(core, fake):
        pushed = [(ALICE, fake.push_message(ALICE, "before the outage"))]
        await fake.wait_for_sent(ALICE)

        await database.stop()
        pushed.append((BOB, fake.push_message(BOB, "while the database is down")))
        pushed.append((ALICE, fake.push_message(ALICE, "are you still there?")))
        during = set(fake.pending_updates)
        await fake.wait_for(lambda: during <= handed_out(fake))
        await asyncio.sleep(0.5)  # the bot fetched them and tried to store them
        assert url is not None and await database.start() == url.get_secret_value()

        pushed.append((BOB, fake.push_message(BOB, "after the restart")))
        stored = await eventually_stored(core, len(pushed), within=8)
        await asyncio.sleep(0.3)  # anything sent twice would arrive now

    assert_all_kept_and_answered(stored, pushed)
    replies = [plain(m.text) for person in (ALICE, BOB) for m in fake.sent[person]]
    assert replies and set(replies) == {ANSWER}
    assert len(fake.sent[ALICE]) <= 2 and 1 <= len(fake.sent[BOB]) <= 2


async def test_in_webhook_mode_an_update_arriving_during_an_outage_comes_back_and_is_kept(
    core: Core, database: RestartableDatabase
) -> None:
    url = core.settings.database_url
    port = free_port()
    hook = f"http://127.0.0.1:{port}/telegram-hook"
    async with (
        FakeTelegramAPI() as fake,
        running(
            core,
            fake,
            telegram_mode="webhook",
            telegram_webhook_url=hook,
            telegram_webhook_port=port,
            telegram_webhook_secret=SecretStr("hook-secret"),
        ),
    ):
        pushed = [(ALICE, fake.push_message(ALICE, "before the outage"))]
        await fake.wait_for_sent(ALICE)

        await database.stop()
        pushed.append((BOB, fake.push_message(BOB, "while the database is down")))
        [update_id] = fake.pending_updates  # until the webhook answers 200
        await fake.wait_for(lambda: (update_id, 500) in fake.webhook_attempts)
        assert update_id not in fake.webhook_deliveries  # refused, so Telegram keeps it
        assert url is not None and await database.start() == url.get_secret_value()

        stored = await eventually_stored(core, len(pushed), within=8)
        await asyncio.sleep(0.3)  # anything handled twice would show now

    assert_all_kept_and_answered(stored, pushed)
    assert fake.webhook_deliveries.count(update_id) == 1
    assert [plain(m.text) for m in fake.sent[BOB]] == [ANSWER]
