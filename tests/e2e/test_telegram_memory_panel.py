"""The way into the memory panel through python-telegram-bot and the fake Bot API (strict
about Web App buttons as Telegram is: HTTPS only, never in a group): `/memory` in the
private chat carries the "Open memory panel" Mini App button; asked in a group, the
private answer carries none."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, WebAppInfo
from telegram.error import BadRequest

from adapters.telegram_bot import TelegramAdapter
from adapters.telegram_bot.handlers import SENT_PRIVATELY
from bot.bootstrap import Core, build_core
from bot.config import Settings
from tests.conftest import FakeClock
from tests.e2e.test_telegram import ALICE, running
from tests.e2e.test_telegram_commands import GROUP, remember
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.telegram_api import TOKEN, FakeTelegramAPI
from tests.support.panel import PANEL_SECRET

PUBLIC = "https://companion.example"


@pytest.fixture
async def core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
    clock: FakeClock,
    tmp_path: Path,
) -> AsyncIterator[Core]:
    """A core with the memory panel on."""
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        burst_window_seconds=0.05,
        public_url=PUBLIC,
        panel_secret=PANEL_SECRET,
    )
    built = await build_core(settings, llm=scripted_llm, clock=clock)
    yield built
    await built.aclose()


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


def web_apps(markup: dict[str, object] | None) -> list[tuple[str, str]]:
    rows = (markup or {}).get("inline_keyboard", [])
    return [
        (button["text"], button["web_app"]["url"])
        for row in rows  # type: ignore[attr-defined]
        for button in row
        if "web_app" in button
    ]


async def test_memory_in_the_private_chat_offers_the_mini_app(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, core: Core
) -> None:
    await remember(core, ALICE, "I keep bees")
    fake.start_chat(ALICE)
    fake.push_message(ALICE, "/memory")
    [reply] = await fake.wait_for_sent(ALICE)
    assert web_apps(reply.reply_markup) == [("🗂 Open memory panel", f"{PUBLIC}/memory-panel/tg")]
    assert "keep bees" in reply.text.lower()
    assert [label for row in reply.buttons for label, _ in row][1:] != []  # the usual ones


async def test_memory_asked_in_a_group_gets_no_mini_app_button(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, core: Core
) -> None:
    await remember(core, ALICE, "I keep bees")
    fake.start_chat(ALICE)
    fake.push_message(ALICE, "/memory", chat_id=GROUP, chat_type="supergroup")
    [private] = await fake.wait_for_sent(ALICE)
    [notice] = await fake.wait_for_sent(GROUP)
    assert notice.text == SENT_PRIVATELY
    assert web_apps(private.reply_markup) == [] and "memory-panel" not in private.text


async def test_the_fake_refuses_web_app_buttons_telegram_refuses(
    fake: FakeTelegramAPI,
) -> None:
    fake.start_chat(ALICE)
    fake.push_message(ALICE, "hello", chat_id=GROUP, chat_type="supergroup")  # a group chat
    async with Bot(TOKEN, base_url=f"{fake.base_url}/bot") as bot:
        button = InlineKeyboardButton("Open", web_app=WebAppInfo(f"{PUBLIC}/memory-panel/tg"))
        await bot.send_message(ALICE, "ok", reply_markup=InlineKeyboardMarkup([[button]]))
        plain = InlineKeyboardButton("Open", web_app=WebAppInfo("http://companion.example/"))
        with pytest.raises(BadRequest, match=r"(?i)button_url_invalid"):
            await bot.send_message(ALICE, "no", reply_markup=InlineKeyboardMarkup([[plain]]))
        with pytest.raises(BadRequest, match=r"(?i)button_type_invalid"):
            await bot.send_message(GROUP, "no", reply_markup=InlineKeyboardMarkup([[button]]))
