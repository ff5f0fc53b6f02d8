"""Proactive delivery on Telegram end to end: `TelegramDelivery` through the real bot
against the fake Bot API — flood control, blocked people, membership changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import structlog.testing
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut

from adapters.telegram_bot import TelegramAdapter, open_telegram_delivery
from adapters.telegram_bot.delivery import failure_for
from bot.bootstrap import Core
from bot.domain import Recipient, Reply
from bot.errors import ConfigurationError, DeliveryFailed
from memory.store.tables import Message
from tests.e2e.test_telegram import (
    ALICE,
    BOB,
    GatedLLM,
    identity,
    rows,
    running,
    telegram_settings,
)
from tests.fakes.telegram_api import BOT_ID, FakeTelegramAPI
from tests.support.timezone_question import plain


def recipient(user_id: int, chat_id: int | None = None) -> Recipient:
    """The person's private chat (their user id, on Telegram)."""
    return Recipient(1, "telegram", str(user_id), str(chat_id if chat_id is not None else user_id))


@pytest.fixture
def scripted_llm() -> GatedLLM:
    """A model that answers only while its gate is open (open by default)."""
    return GatedLLM()


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    """The fake Bot API."""
    async with FakeTelegramAPI() as api:
        yield api


@pytest.fixture
async def adapter(core: Core, fake: FakeTelegramAPI) -> AsyncIterator[TelegramAdapter]:
    """The adapter, polling the fake."""
    async with running(core, fake) as started:
        yield started


async def wait_reachable(db: async_sessionmaker[AsyncSession], user_id: int, value: bool) -> None:
    """Wait (up to three seconds) until the person's identity is (un)reachable."""
    for _ in range(150):
        if (await identity(db, user_id)).reachable is value:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"identity {user_id} never became reachable={value}")


async def test_a_proactive_message_reaches_the_private_chat(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    fake.start_chat(ALICE)

    message_id = await adapter.delivery.send(recipient(ALICE), Reply("Good morning! <3 & tea?"))

    [sent] = fake.sent[ALICE]
    assert message_id == str(sent.message_id)
    assert sent.text == "Good morning! <3 & tea?"
    assert adapter.delivery.platform == "telegram"


async def test_a_blocked_person_fails_as_blocked_and_becomes_unreachable(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    fake.push_message(ALICE, "hi")
    await fake.wait_for_sent(ALICE)
    fake.block(ALICE)

    with pytest.raises(DeliveryFailed) as failed:
        await adapter.delivery.send(recipient(ALICE), Reply("Still there?"))

    assert failed.value.reason == "blocked"
    assert "blocked by the user" in failed.value.detail
    assert (await identity(db, ALICE)).reachable is False


async def test_blocking_the_bot_while_it_writes_a_reply_marks_the_person_unreachable(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    core: Core,
    scripted_llm: GatedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    fake.push_message(ALICE, "hi")
    await fake.wait_for_sent(ALICE)
    person = (await identity(db, ALICE)).user_id
    assert [r.platform for r in await core.outbound.recipients(person)] == ["telegram"]
    scripted_llm.gate.clear()

    with structlog.testing.capture_logs() as logs:
        fake.push_message(ALICE, "let me tell you about my day")
        await fake.wait_for(lambda: len(fake.chat_actions) >= 2)  # the model is writing
        fake.block(ALICE)
        scripted_llm.gate.set()
        await wait_reachable(db, ALICE, False)

    assert [plain(m.text) for m in fake.sent[ALICE]] == ["Tell me more."]  # only the first
    assert fake.calls_of("sendMessage")[-1]["text"] == "Tell me more."  # the refused one
    assert len(fake.calls_of("sendMessage")) == 2
    assert await core.outbound.recipients(person) == []
    events = [entry["event"] for entry in logs]
    assert "telegram.blocked_by_person" in events and "telegram.turn_failed" not in events
    stored = await rows(db, Message.role == "user")
    assert [m.content for m in stored] == ["hi", "let me tell you about my day"]


async def test_blocking_and_unblocking_the_bot_updates_reachability(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    fake.push_message(ALICE, "hi")
    await fake.wait_for_sent(ALICE)

    fake.push_my_chat_member(ALICE, "kicked")
    await wait_reachable(db, ALICE, False)

    fake.push_my_chat_member(ALICE, "member", old_status="kicked")
    await wait_reachable(db, ALICE, True)


async def test_flood_control_is_waited_out_and_retried(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    fake.start_chat(ALICE)
    fake.fail("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)

    started = time.monotonic()
    await adapter.delivery.send(recipient(ALICE), Reply("Checking in"))

    assert time.monotonic() - started >= 1.0
    assert len(fake.calls_of("sendMessage")) == 2
    assert [m.text for m in fake.sent[ALICE]] == ["Checking in"]


async def test_flood_control_beyond_our_patience_fails_as_rate_limited(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    fake.start_chat(ALICE)
    fake.fail("sendMessage", 429, "Too Many Requests: retry after 3600", retry_after=3600)

    with pytest.raises(DeliveryFailed) as failed:
        await adapter.delivery.send(recipient(ALICE), Reply("Checking in"))

    assert failed.value.reason == "rate_limited"
    assert fake.sent[ALICE] == []


async def test_groups_and_strangers_are_not_delivered_to(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    with pytest.raises(DeliveryFailed) as group:
        await adapter.delivery.send(recipient(ALICE, chat_id=-100123), Reply("hello group"))
    with pytest.raises(DeliveryFailed) as stranger:
        await adapter.delivery.send(recipient(BOB), Reply("hello stranger"))

    assert group.value.reason == "unreachable"
    assert stranger.value.reason == "blocked"
    assert [call["chat_id"] for call in fake.calls_of("sendMessage")] == [BOB]


async def test_other_errors_keep_their_reason(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    fake.start_chat(ALICE)
    fake.fail("sendMessage", 400, "Bad Request: chat not found")
    fake.fail("sendMessage", 500, "Internal Server Error", times=3)  # retried twice first

    reasons = []
    for _ in range(2):
        with pytest.raises(DeliveryFailed) as failed:
            await adapter.delivery.send(recipient(ALICE), Reply("hi"))
        reasons.append(failed.value.reason)

    assert reasons == ["unreachable", "error"]


async def test_a_delivery_without_the_adapter_for_a_scheduler_process(
    core: Core, fake: FakeTelegramAPI
) -> None:
    fake.start_chat(ALICE)
    async with open_telegram_delivery(core, telegram_settings(core, fake)) as delivery:
        await delivery.send(recipient(ALICE), Reply("From the scheduler"))

    assert [m.text for m in fake.sent[ALICE]] == ["From the scheduler"]
    assert [name for name, _ in fake.calls] == ["getMe", "sendMessage"]


async def test_the_adapter_and_a_scheduler_process_keep_one_pace_for_the_bot(
    adapter: TelegramAdapter,
    core: Core,
    fake: FakeTelegramAPI,
    db: async_sessionmaker[AsyncSession],
) -> None:
    fake.start_chat(ALICE)
    fake.start_chat(BOB)
    async with open_telegram_delivery(core, telegram_settings(core, fake)) as scheduler:
        await asyncio.gather(
            adapter.delivery.send(recipient(ALICE), Reply("From the adapter")),
            scheduler.send(recipient(BOB), Reply("From the scheduler")),
        )

    async with db() as session:
        paces = (await session.execute(text("SELECT key, next_at FROM send_paces"))).all()
    assert [key for key, _ in paces] == [f"telegram:{BOT_ID}"]  # one pace, the bot's
    assert [m.text for m in fake.sent[ALICE]] == ["From the adapter"]
    assert [m.text for m in fake.sent[BOB]] == ["From the scheduler"]


async def test_a_wrong_token_is_a_clear_configuration_error(
    core: Core, fake: FakeTelegramAPI
) -> None:
    wrong = "42:AAnotTheRightTokenAtAll_abcdefghijklmnop"
    settings = telegram_settings(core, fake, telegram_bot_token=SecretStr(wrong))

    adapter = TelegramAdapter(core, settings)
    with pytest.raises(ConfigurationError) as raised:
        await adapter.start()

    assert "rejected" in str(raised.value)
    assert wrong not in str(raised.value) and raised.value.__cause__ is None


def test_telegram_errors_map_to_delivery_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")
    cases = {
        "blocked": Forbidden("Forbidden: bot was blocked by the user"),
        "unreachable": Forbidden("Forbidden: user is deactivated"),
        "rate_limited": RetryAfter(5),
        "error": NetworkError("connection reset"),
    }
    assert {reason: failure_for(exc).reason for reason, exc in cases.items()} == {
        reason: reason for reason in cases
    }
    assert failure_for(BadRequest("Bad Request: chat not found")).reason == "unreachable"
    assert failure_for(TimedOut()).reason == "error"
