"""The Telegram adapter end to end: the real python-telegram-bot `Application` against the
loopback fake of the Bot API, the real core and PostgreSQL, a scripted model.

This module also holds the small harness the other `test_telegram_*` modules share.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.ratelimit import RATE_LIMITED, RateLimiter
from adapters.telegram_bot import TelegramAdapter
from bot import metrics
from bot.bootstrap import Core
from bot.commands.catalog import COMMANDS
from bot.config import Settings
from bot.domain import IncomingMessage, Reply
from bot.llm import Completion, LLMRequest
from memory.store.tables import Identity, Message
from tests.fakes.chat_llm import ScriptedLLM, text
from tests.fakes.telegram_api import TOKEN, FakeTelegramAPI, escape
from tests.support.timezone_question import answer_part

ALICE = 1001
BOB = 1002


@dataclass
class GatedLLM(ScriptedLLM):
    """A scripted model that answers only while its gate is open (open by default)."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.gate.set()

    async def complete(self, request: LLMRequest) -> Completion:
        await self.gate.wait()
        return await super().complete(request)


@pytest.fixture
def scripted_llm() -> GatedLLM:
    """The model the core talks to (overrides the e2e fixture with a gated one)."""
    return GatedLLM()


def telegram_settings(core: Core, fake: FakeTelegramAPI, **overrides: Any) -> Settings:
    """The core's settings pointed at the fake Bot API, with a tiny burst window."""
    values: dict[str, Any] = {
        "telegram_bot_token": SecretStr(TOKEN),
        "telegram_api_base_url": fake.base_url,
        "burst_window_seconds": 0.05,
        **overrides,
    }
    return core.settings.model_copy(update=values)


@contextlib.asynccontextmanager
async def running(
    core: Core, fake: FakeTelegramAPI, *, limiter: RateLimiter | None = None, **overrides: Any
) -> AsyncIterator[TelegramAdapter]:
    """A started adapter, stopped (cleanly) on exit."""
    adapter = TelegramAdapter(
        core,
        telegram_settings(core, fake, **overrides),
        rate_limiter=limiter,
        typing_interval=0.05,
    )
    await adapter.start()
    try:
        yield adapter
    finally:
        await adapter.stop()


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


async def rows(db: async_sessionmaker[AsyncSession], *where: Any) -> list[Message]:
    """Stored messages, oldest first."""
    async with db() as session:
        return list(
            (await session.scalars(select(Message).where(*where).order_by(Message.id))).all()
        )


async def identity(db: async_sessionmaker[AsyncSession], user_id: int) -> Identity:
    """The person's Telegram identity."""
    async with db() as session:
        found = await session.scalar(
            select(Identity).where(
                Identity.platform == "telegram", Identity.platform_user_id == str(user_id)
            )
        )
    assert found is not None
    return found


# Conversation


async def test_a_message_is_stored_answered_and_typing_is_shown(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    message_id = fake.push_message(ALICE, "Hello there", first_name="Alice")

    sent = await fake.wait_for_sent(ALICE)

    assert [answer_part(m.text) for m in sent] == ["Tell me more."]  # and the first
    assert sent[0].parse_mode == "HTML"  # contact's timezone question, with its buttons
    assert sent[0].reply_markup is not None
    assert (ALICE, "typing") in fake.chat_actions
    stored = await rows(db)
    assert [(m.role, m.content, m.status) for m in stored] == [
        ("user", "Hello there", "answered"),
        ("assistant", "Tell me more.", "stored"),
    ]
    assert stored[0].platform_message_id == str(message_id)
    assert stored[0].chat_id == str(ALICE)
    assert (await identity(db, ALICE)).chat_id == str(ALICE)


async def test_the_command_menu_is_the_catalog(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, core: Core
) -> None:
    catalog = {c.name: c.description for c in COMMANDS}
    menu = {c["command"]: c["description"] for c in fake.commands}
    assert {"start", "help"} <= set(menu)
    assert all(catalog[name] == description for name, description in menu.items())
    assert set(menu) == set(catalog) & set(core.router.command_names)


async def test_help_start_and_an_unknown_command(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, scripted_llm: ScriptedLLM, core: Core
) -> None:
    fake.push_message(ALICE, "/start")
    fake.push_message(ALICE, "/help@companion_test_bot")
    fake.push_message(ALICE, "/frobnicate now")

    sent = await fake.wait_for_sent(ALICE, 3)

    help_reply = await core.router.handle(
        IncomingMessage(platform="telegram", platform_user_id=str(ALICE), text="/help")
    )
    assert sent[0].text.strip() and sent[0].text != help_reply.text
    assert sent[1].text == help_reply.text
    assert "/frobnicate" in sent[2].text and "/help" in sent[2].text
    assert scripted_llm.chat_requests == []


async def test_a_long_reply_is_split_within_the_limit(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, scripted_llm: ScriptedLLM
) -> None:
    long_reply = " ".join(f"Sentence number {i} is here." for i in range(400))
    scripted_llm.script.append(text(long_reply))

    fake.push_message(ALICE, "Tell me a long story")
    await fake.wait_for(lambda: "timezone" in " ".join(m.text for m in fake.sent[ALICE]))

    pieces = [m.text for m in fake.sent[ALICE]]
    assert len(pieces) == 3
    assert all(len(piece) <= 4096 for piece in pieces)
    assert answer_part(" ".join(pieces)) == long_reply


async def test_a_reply_full_of_emoji_is_split_by_telegram_length(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, scripted_llm: ScriptedLLM
) -> None:
    emoji_reply = "😀 " * 2500
    scripted_llm.script.append(text(emoji_reply))

    fake.push_message(ALICE, "Send me smiles")
    await fake.wait_for(lambda: sum(m.text.count("😀") for m in fake.sent[ALICE]) == 2500)

    assert len(fake.sent[ALICE]) == 2
    assert all(len(m.text.encode("utf-16-le")) // 2 <= 4096 for m in fake.sent[ALICE])


async def test_the_core_reaches_people_through_telegram_while_it_runs(
    core: Core, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    async with running(core, fake):
        fake.push_message(ALICE, "hi")
        await fake.wait_for_sent(ALICE)
        person = (await identity(db, ALICE)).user_id

        recipient, message_id = await core.outbound.send(person, Reply("A note from me"))

    assert (recipient.platform, recipient.chat_id) == ("telegram", str(ALICE))
    assert message_id == str(fake.sent[ALICE][-1].message_id)
    assert fake.sent[ALICE][-1].text == "A note from me"
    assert await core.outbound.recipients(person) == []


async def test_html_special_characters_are_delivered_as_written(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, scripted_llm: ScriptedLLM
) -> None:
    written = "Use <b>bold</b> & **unbalanced *markdown_ and a < b > c &amp; done"
    scripted_llm.script.append(text(written))

    fake.push_message(ALICE, "Show me symbols")
    sent = await fake.wait_for_sent(ALICE)

    assert answer_part(sent[0].text) == written
    assert sent[0].raw.startswith(escape(written) + "\n\n")
    assert sent[0].parse_mode == "HTML"


async def test_the_models_markdown_arrives_formatted(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script.append(text("**Good luck** with the *interview* on `Friday`!"))

    fake.push_message(ALICE, "Wish me luck")
    sent = await fake.wait_for_sent(ALICE)

    assert answer_part(sent[0].text) == "Good luck with the interview on Friday!"
    assert sent[0].raw.startswith(
        "<b>Good luck</b> with the <i>interview</i> on <code>Friday</code>!"
    )
    assert sent[0].parse_mode == "HTML"


async def test_a_formatting_rejection_is_resent_as_plain_text(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    fake.fail(
        "sendMessage",
        400,
        'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0',
    )

    fake.push_message(ALICE, "Hi")
    sent = await fake.wait_for_sent(ALICE)

    assert [(answer_part(m.text), m.parse_mode) for m in sent] == [("Tell me more.", None)]
    assert [p.get("parse_mode") for p in fake.calls_of("sendMessage")] == ["HTML", None]


async def test_a_burst_is_answered_once_with_all_of_it(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    labels = {"platform": "telegram", "kind": "message"}
    handled = metrics.REGISTRY.get_sample_value("companion_messages_handled_total", labels) or 0
    for line in ("I have news", "big news", "I got the job!"):
        fake.push_message(ALICE, line)

    await fake.wait_for_sent(ALICE)
    await asyncio.sleep(0.2)

    assert len(fake.sent[ALICE]) == 1
    assert len(scripted_llm.chat_requests) == 1
    prompt = scripted_llm.last_prompt_text()
    assert all(line in prompt for line in ("I have news", "big news", "I got the job!"))
    stored = await rows(db, Message.role == "user")
    assert [m.status for m in stored] == ["answered"] * 3
    after = metrics.REGISTRY.get_sample_value("companion_messages_handled_total", labels)
    assert after == handled + 3  # each message counted once, the answered one too


async def test_a_person_over_the_rate_limit_is_told_once_and_every_message_is_kept(
    core: Core,
    fake: FakeTelegramAPI,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    limiter = RateLimiter(per_minute=0.001, burst=1)
    over_the_limit = ["hello?", "are you there?", "I got the job!"]
    async with running(core, fake, limiter=limiter):
        fake.push_message(ALICE, "/help")
        ids = [fake.push_message(ALICE, line) for line in over_the_limit]
        fake.push_message(BOB, "/help")

        await fake.wait_for_sent(BOB)
        sent = await fake.wait_for_sent(ALICE, 2)
        await fake.wait_for(lambda: not fake.pending_updates)

    assert [m.text for m in fake.sent[ALICE]][1:] == [RATE_LIMITED]
    assert len(sent) == 2
    assert scripted_llm.chat_requests == []
    kept = await rows(db, Message.role == "user")
    assert [(m.content, m.status) for m in kept] == [(line, "stored") for line in over_the_limit]
    assert [m.platform_message_id for m in kept] == [str(i) for i in ids]
    assert {m.chat_id for m in kept} == {str(ALICE)}


async def test_photos_stickers_and_voice_get_a_friendly_note_and_captions_are_text(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    fake.push_photo(ALICE)
    fake.push_media(ALICE, "sticker")
    fake.push_media(ALICE, "voice")
    sent = await fake.wait_for_sent(ALICE, 3)
    assert ["photos" in sent[0].text, "stickers" in sent[1].text, "voice" in sent[2].text] == [
        True
    ] * 3
    assert all("text" in m.text for m in sent)
    assert scripted_llm.chat_requests == []

    fake.push_photo(ALICE, caption="My new bike!")
    await fake.wait_for_sent(ALICE, 4)
    assert [m.content for m in await rows(db, Message.role == "user")] == ["My new bike!"]


async def test_an_edited_message_updates_the_stored_text_without_a_new_reply(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    message_id = fake.push_message(ALICE, "I live in Berlin")
    await fake.wait_for_sent(ALICE)

    fake.push_edited(ALICE, message_id, "I live in Hamburg")
    await fake.wait_for(lambda: not fake.pending_updates)
    fake.push_message(ALICE, "/help")
    await fake.wait_for_sent(ALICE, 2)

    user_rows = await rows(db, Message.role == "user")
    assert [(m.content, m.edited_at is not None) for m in user_rows] == [
        ("I live in Hamburg", True)
    ]
    assert len(fake.sent[ALICE]) == 2


async def test_a_slow_turn_keeps_showing_typing(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, scripted_llm: GatedLLM
) -> None:
    scripted_llm.gate.clear()

    fake.push_message(ALICE, "Think hard")
    await fake.wait_for(lambda: len(fake.chat_actions) >= 3)
    assert fake.sent[ALICE] == []
    scripted_llm.gate.set()

    await fake.wait_for_sent(ALICE)
    assert set(fake.chat_actions) == {(ALICE, "typing")}
