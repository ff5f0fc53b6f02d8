"""Telegram group chats end to end: the bot answers only when addressed, remembers per
person (never per group), and sends anything personal to the person's private chat."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.telegram_bot import TelegramAdapter
from adapters.telegram_bot.handlers import SENT_PRIVATELY
from bot.bootstrap import Core
from bot.domain import Button, ButtonPress, IncomingMessage, Reply
from memory.store.tables import Message
from tests.e2e.test_telegram import ALICE, BOB, identity, rows, running
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.telegram_api import BOT_USERNAME, FakeTelegramAPI

GROUP = -1001234567890
SECRET = "You told me you're allergic to penicillin."


def register_personal(core: Core) -> list[IncomingMessage]:
    """`/memory` (personal in the catalog) and `/tsecret` (a private Reply), for the test."""
    seen: list[IncomingMessage] = []

    async def memory(incoming: IncomingMessage, args: str) -> Reply:
        seen.append(incoming)
        return Reply(SECRET)

    async def secret(incoming: IncomingMessage, args: str) -> Reply:
        seen.append(incoming)
        return Reply(SECRET, private=True)

    core.router.register("memory", memory)
    core.router.register("tsecret", secret)
    return seen


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    """The fake Bot API."""
    async with FakeTelegramAPI() as api:
        yield api


@pytest.fixture
def seen(core: Core) -> list[IncomingMessage]:
    """What the personal commands received."""
    return register_personal(core)


@pytest.fixture
async def adapter(
    core: Core, fake: FakeTelegramAPI, seen: list[IncomingMessage]
) -> AsyncIterator[TelegramAdapter]:
    """The adapter, polling the fake."""
    async with running(core, fake) as started:
        yield started


def in_group(fake: FakeTelegramAPI, user: int, text: str, *, reply_to_bot: bool = False) -> int:
    """`user` writes `text` in the group."""
    return fake.push_message(
        user, text, chat_id=GROUP, chat_type="supergroup", reply_to_bot=reply_to_bot
    )


async def test_a_mention_is_answered_in_the_group_and_remembered_for_the_person(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    fake.push_message(ALICE, "hi in private")
    await fake.wait_for_sent(ALICE)

    asked = in_group(fake, ALICE, f"@{BOT_USERNAME}, what's a good book?")
    [answer] = await fake.wait_for_sent(GROUP)

    assert answer.text == "Tell me more."
    assert answer.reply_to == asked
    stored = await rows(db, Message.role == "user")
    assert [(m.content, m.chat_id) for m in stored] == [
        ("hi in private", str(ALICE)),
        ("what's a good book?", str(GROUP)),
    ]
    assert len({m.user_id for m in stored}) == 1
    assert (await identity(db, ALICE)).chat_id == str(ALICE)
    assert len(scripted_llm.chat_requests) == 2


async def test_a_group_message_that_is_not_for_the_bot_is_ignored(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
) -> None:
    in_group(fake, ALICE, "just chatting with friends")
    in_group(fake, ALICE, "/help@some_other_bot")
    in_group(fake, BOB, f"mail me at bob@{BOT_USERNAME}.com")
    in_group(fake, BOB, f"hey @{BOT_USERNAME} how are you")

    [answer] = await fake.wait_for_sent(GROUP)
    await fake.wait_for(lambda: not fake.pending_updates)

    assert answer.text == "Tell me more."
    assert [m.content for m in await rows(db, Message.role == "user")] == ["hey how are you"]
    assert len(scripted_llm.chat_requests) == 1
    assert len(fake.sent[GROUP]) == 1


async def test_a_reply_to_the_bot_is_answered(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, db: async_sessionmaker[AsyncSession]
) -> None:
    in_group(fake, ALICE, f"@{BOT_USERNAME} hello")
    await fake.wait_for_sent(GROUP)

    replied = in_group(fake, BOB, "and what do you think?", reply_to_bot=True)
    answers = await fake.wait_for_sent(GROUP, 2)

    assert answers[1].reply_to == replied
    bob = await rows(db, Message.role == "user", Message.content == "and what do you think?")
    assert len(bob) == 1
    assert (await identity(db, BOB)).chat_id is None


async def test_a_personal_command_in_a_group_is_answered_in_private(
    adapter: TelegramAdapter,
    fake: FakeTelegramAPI,
    seen: list[IncomingMessage],
    db: async_sessionmaker[AsyncSession],
) -> None:
    fake.start_chat(ALICE)

    in_group(fake, ALICE, "/memory")
    [private] = await fake.wait_for_sent(ALICE)
    in_group(fake, ALICE, f"/tsecret@{BOT_USERNAME}")
    await fake.wait_for_sent(ALICE, 2)
    notices = await fake.wait_for_sent(GROUP, 2)

    assert private.text == SECRET
    assert [m.text for m in fake.sent[ALICE]] == [SECRET, SECRET]
    assert [m.text for m in notices] == [SENT_PRIVATELY] * 2
    assert [(i.platform_user_id, i.chat_id, i.is_private) for i in seen] == [
        (str(ALICE), str(GROUP), False)
    ] * 2


async def test_a_personal_command_from_someone_without_a_private_chat_gets_a_pointer(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    in_group(fake, BOB, "/memory")

    [notice] = await fake.wait_for_sent(GROUP)

    assert f"https://t.me/{BOT_USERNAME}" in notice.text
    assert "penicillin" not in notice.text
    assert fake.sent[BOB] == []


async def test_a_group_button_with_a_private_answer_goes_to_the_presser(
    core: Core, fake: FakeTelegramAPI
) -> None:
    async def menu(incoming: IncomingMessage, args: str) -> Reply:
        return Reply("Pick one", buttons=((Button("Show mine", "tmine:1"),),))

    async def mine(press: ButtonPress, rest: str) -> Reply:
        return Reply(SECRET, private=True)

    core.router.register("tmenu", menu)
    core.router.register_press("tmine", mine)
    fake.start_chat(BOB)
    async with running(core, fake):
        in_group(fake, ALICE, "/tmenu")
        [message] = await fake.wait_for_sent(GROUP)
        fake.push_callback(BOB, "tmine:1", message.message_id, chat_id=GROUP)
        [private] = await fake.wait_for_sent(BOB)
        await fake.wait_for_sent(GROUP, 2)

    assert private.text == SECRET
    assert message.text == "Pick one"
    assert all(SECRET not in m.text for m in fake.sent[GROUP])
