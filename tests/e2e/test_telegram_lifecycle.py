"""The Telegram adapter's lifecycle end to end: a restart with updates still waiting at
Telegram handles each exactly once, a stop answers waiting bursts, and webhook mode
(answered only once an update was handled, so nothing is lost across a restart)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.telegram_bot import TelegramAdapter, run_telegram
from bot.bootstrap import Core
from bot.domain import IncomingMessage
from bot.errors import ConfigurationError
from memory.store.tables import Message
from tests.conftest import FakeClock
from tests.e2e.test_telegram import ALICE, rows, running, telegram_settings
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.timezone_question import plain

PEOPLE = [2001, 2002, 2003, 2004, 2005, 2006]
SECRET = "webhook-secret_123"


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    """The fake Bot API, handing out one update per getUpdates."""
    async with FakeTelegramAPI(batch_limit=1) as api:
        yield api


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_a_restart_with_waiting_updates_handles_each_exactly_once(
    core: Core,
    fake: FakeTelegramAPI,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    async with running(core, fake):
        for person in PEOPLE[:2]:
            fake.push_message(person, f"hello from {person}")
        await fake.wait_for(lambda: all(fake.sent[p] for p in PEOPLE[:2]))
        for person in PEOPLE[2:]:
            fake.push_message(person, f"hello from {person}")
    first_run_calls = len(fake.get_updates_calls)
    confirmed_by_first = fake.confirmed_offset
    assert len(fake.pending_updates) >= 3

    async with running(core, fake):
        await fake.wait_for(lambda: all(fake.sent[p] for p in PEOPLE) and not fake.pending_updates)

    assert {p: [plain(m.text) for m in fake.sent[p]] for p in PEOPLE} == {
        p: ["Tell me more."] for p in PEOPLE
    }
    assert len(scripted_llm.chat_requests) == len(PEOPLE)
    stored = await rows(db)
    assert sorted(m.content for m in stored if m.role == "user") == sorted(
        f"hello from {p}" for p in PEOPLE
    )
    assert {m.status for m in stored if m.role == "user"} == {"answered"}
    assert len([m for m in stored if m.role == "assistant"]) == len(PEOPLE)
    second_run = fake.get_updates_calls[first_run_calls:]
    assert all(i >= confirmed_by_first for call in second_run for i in call.returned)
    offsets = [c.offset for c in fake.get_updates_calls if c.offset]
    assert offsets == sorted(offsets)


async def test_stopping_answers_a_burst_that_is_still_waiting(
    core: Core, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    async with running(core, fake, burst_window_seconds=30):
        fake.push_message(ALICE, "one last thing")
        await fake.wait_for(lambda: not fake.pending_updates)
        await asyncio.sleep(0.1)
        assert fake.sent[ALICE] == []

    assert [plain(m.text) for m in fake.sent[ALICE]] == ["Tell me more."]
    assert [(m.role, m.status) for m in await rows(db)] == [
        ("user", "answered"),
        ("assistant", "stored"),
    ]


async def test_run_telegram_runs_until_told_to_stop(core: Core, fake: FakeTelegramAPI) -> None:
    core.settings = telegram_settings(core, fake)
    stop = asyncio.Event()
    running_bot = asyncio.create_task(run_telegram(core, stop))

    fake.push_message(ALICE, "/help")
    await fake.wait_for_sent(ALICE)
    stop.set()
    await asyncio.wait_for(running_bot, 3)

    assert fake.pending_updates == []


async def test_webhook_mode_receives_updates_and_rejects_a_wrong_secret(
    core: Core, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram-hook"
    async with running(
        core,
        fake,
        telegram_mode="webhook",
        telegram_webhook_url=url,
        telegram_webhook_listen="127.0.0.1",
        telegram_webhook_port=port,
        telegram_webhook_secret=SecretStr(SECRET),
    ):
        assert (fake.webhook_url, fake.webhook_secret) == (url, SECRET)

        fake.push_message(ALICE, "Hello over the webhook")
        [reply] = await fake.wait_for_sent(ALICE)

        async with aiohttp.ClientSession() as client:
            forged = {"update_id": 1, "message": {"message_id": 1, "date": 0, "text": "x"}}
            headers = {"X-Telegram-Bot-Api-Secret-Token": "wrong"}
            async with client.post(url, json=forged, headers=headers) as response:
                assert response.status == 403
            headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
            for body in ("not json", "[1, 2]", '{"message": {}}', '{"update_id": 5, "message": 7}'):
                async with client.post(url, data=body, headers=headers) as response:
                    assert response.status == 400

    assert plain(reply.text) == "Tell me more."
    assert fake.get_updates_calls == []
    assert [m.content for m in await rows(db, Message.role == "user")] == ["Hello over the webhook"]


async def test_webhook_mode_keeps_updates_that_arrive_while_stopped_and_handles_each_once(
    core: Core, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    port = free_port()
    hook = {
        "telegram_mode": "webhook",
        "telegram_webhook_url": f"http://127.0.0.1:{port}/telegram-hook",
        "telegram_webhook_port": port,
        "telegram_webhook_secret": SecretStr(SECRET),
    }
    async with running(core, fake, **hook):
        fake.push_message(ALICE, "first")
        await fake.wait_for_sent(ALICE)
    fake.push_message(PEOPLE[0], "while the bot is down")
    await fake.wait_for(lambda: any(status == 0 for _, status in fake.webhook_attempts))
    assert len(fake.pending_updates) == 1  # nobody answered: Telegram keeps it

    async with running(core, fake, **hook):
        await fake.wait_for(lambda: bool(fake.sent[PEOPLE[0]]) and not fake.pending_updates)
        await asyncio.sleep(0.2)  # anything handled twice would show now

    assert sorted(fake.webhook_deliveries) == sorted(set(fake.webhook_deliveries))
    assert [plain(m.text) for m in fake.sent[PEOPLE[0]]] == ["Tell me more."]
    assert sorted(m.content for m in await rows(db, Message.role == "user")) == [
        "first",
        "while the bot is down",
    ]


async def test_webhook_mode_needs_a_url_and_a_secret(core: Core, fake: FakeTelegramAPI) -> None:
    settings = telegram_settings(core, fake, telegram_mode="webhook", telegram_webhook_url=None)
    with pytest.raises(ConfigurationError, match="WEBHOOK_URL"):
        await TelegramAdapter(core, settings).start()

    settings = telegram_settings(
        core, fake, telegram_mode="webhook", telegram_webhook_url="https://bot.example.org/tg"
    )
    with pytest.raises(ConfigurationError, match="WEBHOOK_SECRET"):
        await TelegramAdapter(core, settings).start()


async def test_messages_stored_before_a_crash_are_answered_after_the_restart(
    core: Core,
    fake: FakeTelegramAPI,
    clock: FakeClock,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    def said(person: int, text: str, message_id: int, *, private: bool = True) -> IncomingMessage:
        return IncomingMessage(
            platform="telegram",
            platform_user_id=str(person),
            text=text,
            chat_id=str(person if private else -100),
            display_name=f"P{person}",
            platform_message_id=str(message_id),
            is_private=private,
        )

    # Stored by a process that died before answering (their updates were confirmed).
    await core.router.record(said(PEOPLE[0], "two days ago", 1))
    clock.advance(days=2)
    await core.router.record(said(PEOPLE[1], "my exam went badly", 2))
    await core.router.record(said(PEOPLE[1], "really badly", 3))
    await core.router.record(said(PEOPLE[2], "in the group", 4, private=False))
    for person in PEOPLE[:3]:
        fake.start_chat(person)

    async with running(core, fake):
        await fake.wait_for(lambda: bool(fake.sent[PEOPLE[1]]))
        await asyncio.sleep(0.3)  # nothing else is answered

    assert len(fake.sent[PEOPLE[1]]) == 1  # one answer for the burst
    assert [p for p in PEOPLE if fake.sent[p]] == [PEOPLE[1]]
    asked = scripted_llm.chat_requests[-1].turns
    assert [t.content for t in asked][-2:] == ["my exam went badly", "really badly"]
    stored = {(m.platform_message_id, m.status) for m in await rows(db) if m.role == "user"}
    assert stored == {("1", "stored"), ("2", "answered"), ("3", "answered"), ("4", "stored")}
