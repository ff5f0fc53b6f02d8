"""The Discord adapter end to end, messages and lifecycle: the real discord.py client
against the loopback fake of Discord (REST and gateway), a whole core on the test
database, a scripted model. DMs, server mentions and replies, bursts, rate limits,
splitting, edits, RESUME after a dropped connection, a clean stop, sharding.

`point_at` and `running` are shared with the other `test_discord_*` modules.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from adapters.discord_bot import run_discord
from adapters.discord_bot.connection import build_client
from adapters.discord_bot.messages import CANNOT_DM, MENTION_ME, NON_TEXT, SENT_PRIVATELY
from adapters.ratelimit import RATE_LIMITED
from bot.bootstrap import Core
from bot.domain import IncomingMessage, Reply
from bot.llm import LLMRequest
from memory.store.tables import Message
from tests.fakes.chat_llm import ScriptedLLM, context_text, text
from tests.fakes.discord_api import (
    GUILD_CHANNEL_ID,
    TOKEN,
    FakeDiscord,
    SentMessage,
)
from tests.support.timezone_question import answer_part

ALICE = 310_000_000_000_000_001
BOB = 310_000_000_000_000_002


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """The fake Discord (REST and gateway) on a loopback port."""
    async with FakeDiscord(heartbeat_ms=500) as api:
        yield api


def point_at(core: Core, fake: FakeDiscord, **overrides: object) -> None:
    """Give the core's settings a bot token and the fake's URLs."""
    core.settings = core.settings.model_copy(
        update={
            "discord_bot_token": SecretStr(TOKEN),
            "discord_api_base_url": fake.api_base_url,
            "discord_gateway_url": fake.gateway_url,
            **overrides,
        }
    )


@contextlib.asynccontextmanager
async def running(core: Core, fake: FakeDiscord) -> AsyncIterator[None]:
    """`run_discord` in the background until the block ends; then a clean stop."""
    stop = asyncio.Event()
    sessions = len(fake.gateway.sessions)
    task = asyncio.create_task(run_discord(core, stop))
    try:
        await fake.wait_connected(sessions + 1)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    # Discord refuses an unknown interaction or a second response to one; ours never
    # provoke that unless a test arranged it (and then it clears `rejected`).
    assert fake.rejected == [], f"Discord refused interaction callbacks: {fake.rejected}"


@pytest.fixture
async def bot(core: Core, fake: FakeDiscord) -> AsyncIterator[None]:
    """The adapter, running against the fake."""
    point_at(core, fake)
    async with running(core, fake):
        yield


def chat_requests(llm: ScriptedLLM) -> list[LLMRequest]:
    """The model requests of conversation turns (not memory extraction)."""
    return [request for request in llm.requests if request.role == "chat"]


def last_chat_prompt(llm: ScriptedLLM) -> str:
    """Everything the model saw in the last conversation turn."""
    request = chat_requests(llm)[-1]
    turns = "\n".join(f"{turn.role}: {turn.content}" for turn in request.turns)
    return f"{context_text(request)}\n{turns}"


async def stored(core: Core, role: str = "user") -> list[Message]:
    """Every stored message of a role, oldest first."""
    async with core.sessions() as db:
        query = select(Message).where(Message.role == role).order_by(Message.id)
        return list((await db.scalars(query)).all())


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    """Wait until an async check holds (for state the fake does not see, like the DB)."""
    async with asyncio.timeout(within):
        while True:  # the database has no event to wait on: poll it
            if await check():
                return
            await asyncio.sleep(0.02)


async def replies_in(fake: FakeDiscord, channel: int, count: int = 1) -> list[SentMessage]:
    """Wait until the bot posted `count` messages in a channel."""
    return await fake.wait_for(
        lambda: len(fake.sent_to(channel)) >= count and fake.sent_to(channel)
    )


async def test_a_dm_is_stored_and_answered(
    bot: None, fake: FakeDiscord, core: Core, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script.append(text("Hi Alice! How was your day?"))
    message_id = await fake.dm(ALICE, "hello there")

    [reply] = await replies_in(fake, fake.dm_channel(ALICE))

    assert answer_part(reply.content) == "Hi Alice! How was your day?"  # and, on first
    assert "Other…" in reply.labels  # contact, the timezone question with its buttons
    [inbound] = await stored(core)
    assert inbound.content == "hello there"
    assert inbound.platform_message_id == str(message_id)
    assert inbound.chat_id == str(fake.dm_channel(ALICE))
    assert [m.content for m in await stored(core, "assistant")] == [answer_part(reply.content)]
    assert fake.dm_channel(ALICE) in fake.typing


async def test_in_a_server_only_mentions_and_replies_are_answered(
    bot: None, fake: FakeDiscord, core: Core, scripted_llm: ScriptedLLM
) -> None:
    await fake.guild_message(BOB, "just chatting with friends")
    await fake.quiet()
    assert fake.sent_to(GUILD_CHANNEL_ID) == [] and chat_requests(scripted_llm) == []

    mention = await fake.guild_message(BOB, "what do you think?", mention=True)
    [first] = await replies_in(fake, GUILD_CHANNEL_ID)
    assert first.reference == mention
    assert "<@" not in last_chat_prompt(scripted_llm)
    assert "what do you think?" in last_chat_prompt(scripted_llm)

    reply = await fake.guild_message(BOB, "and about this?", reply_to=first)
    second = (await replies_in(fake, GUILD_CHANNEL_ID, 2))[1]
    assert second.reference == reply
    assert [m.content for m in await stored(core)] == ["what do you think?", "and about this?"]
    assert all(m.chat_id == str(GUILD_CHANNEL_ID) for m in await stored(core))

    silent = await fake.guild_message(BOB, "no ping this time", reply_to=first, ping=False)
    third = (await replies_in(fake, GUILD_CHANNEL_ID, 3))[2]
    assert (third.content, third.reference) == (MENTION_ME, silent)
    assert len(await stored(core)) == 2


async def test_a_personal_reply_to_a_server_mention_goes_to_the_dm(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    async def secret(incoming: IncomingMessage, args: str) -> Reply:
        return Reply("Here is what I remember about you: tea.", private=True)

    core.router.register("secret", secret)
    await fake.guild_message(BOB, "/secret", mention=True)

    [public] = await replies_in(fake, GUILD_CHANNEL_ID)
    [private] = await replies_in(fake, fake.dm_channel(BOB))
    assert public.content == SENT_PRIVATELY
    assert private.content.startswith("Here is what I remember")


async def test_a_personal_reply_in_a_server_with_dms_closed_is_only_a_notice(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    remember = "/remember I am allergic to penicillin"
    await core.router.handle(IncomingMessage("discord", str(BOB), remember, is_private=True))
    fake.closed_dms.add(BOB)

    asked = await fake.guild_message(BOB, "/memory", mention=True)
    [notice] = await replies_in(fake, GUILD_CHANNEL_ID)
    await fake.quiet()

    assert (notice.content, notice.reference) == (CANNOT_DM, asked)
    assert fake.sent_to(fake.dm_channel(BOB)) == []
    refused_dm = ("POST", f"/channels/{fake.dm_channel(BOB)}/messages")
    assert refused_dm in fake.requests  # the DM was tried first, and refused (403 50007)
    assert len(fake.messages) == 1 and "penicillin" not in notice.content


async def test_while_connected_the_bot_delivers_proactive_messages(
    fake: FakeDiscord, core: Core
) -> None:
    point_at(core, fake)
    async with running(core, fake):
        await fake.dm(ALICE, "hello")
        await replies_in(fake, fake.dm_channel(ALICE))
        [inbound] = await stored(core)

        recipient, message_id = await core.outbound.send(inbound.user_id, Reply("Morning!"))

        assert recipient.platform == "discord"
        assert recipient.chat_id == str(fake.dm_channel(ALICE))
        assert fake.sent_to(fake.dm_channel(ALICE))[-1].id == int(message_id)
    assert await core.outbound.recipients(inbound.user_id) == []


async def test_a_burst_is_answered_once(
    bot: None, fake: FakeDiscord, core: Core, scripted_llm: ScriptedLLM
) -> None:
    for line in ("so", "guess what", "I got the job!"):
        await fake.dm(ALICE, line)

    await replies_in(fake, fake.dm_channel(ALICE))
    await fake.quiet()

    assert len(fake.sent_to(fake.dm_channel(ALICE))) == 1
    assert len(chat_requests(scripted_llm)) == 1
    assert "guess what" in last_chat_prompt(scripted_llm)
    assert [m.status for m in await stored(core)] == ["answered"] * 3


async def test_a_long_reply_is_split_under_2000_characters(
    bot: None, fake: FakeDiscord, scripted_llm: ScriptedLLM
) -> None:
    long = " ".join(f"Sentence number {i} is here." for i in range(250))
    scripted_llm.script.append(text(long))
    await fake.dm(ALICE, "tell me a long story")

    await fake.wait_for(lambda: any("timezone" in m.content for m in fake.messages))
    pieces = fake.sent_to(fake.dm_channel(ALICE))
    assert len(pieces) >= 3
    assert all(len(p.content) <= 2000 for p in pieces)
    assert answer_part(" ".join(p.content for p in pieces)) == long


async def test_an_attachment_without_text_gets_a_friendly_answer(
    bot: None, fake: FakeDiscord, core: Core, scripted_llm: ScriptedLLM
) -> None:
    photo = {"id": "1", "filename": "cat.jpg", "size": 10, "url": "", "proxy_url": ""}
    await fake.dm(ALICE, "", attachments=[photo])

    [reply] = await replies_in(fake, fake.dm_channel(ALICE))
    assert reply.content == NON_TEXT
    assert await stored(core) == [] and chat_requests(scripted_llm) == []


async def test_too_many_messages_are_kept_but_rate_limited(
    fake: FakeDiscord, core: Core, scripted_llm: ScriptedLLM
) -> None:
    point_at(core, fake, rate_limit_per_minute=1)
    async with running(core, fake):
        for i in range(10):
            await fake.dm(ALICE, f"message {i}")
        await fake.wait_for(lambda: len(fake.sent_to(fake.dm_channel(ALICE))) >= 2)
        await fake.quiet()

    contents = [m.content for m in fake.sent_to(fake.dm_channel(ALICE))]
    assert contents.count(RATE_LIMITED) == 1
    assert len(contents) == 2 and len(chat_requests(scripted_llm)) == 1
    assert len(await stored(core)) == 10


async def test_an_edited_dm_updates_the_stored_message(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    message_id = await fake.dm(ALICE, "I love coffee")
    await replies_in(fake, fake.dm_channel(ALICE))

    await fake.edit_dm(ALICE, message_id, "I love tea")

    async def edited() -> bool:
        return [m.content for m in await stored(core)] == ["I love tea"]

    await eventually(edited)
    [inbound] = await stored(core)
    assert inbound.edited_at is not None


async def test_after_a_dropped_connection_every_message_is_handled_exactly_once(
    bot: None, fake: FakeDiscord, core: Core, scripted_llm: ScriptedLLM
) -> None:
    await fake.dm(ALICE, "one")
    await replies_in(fake, fake.dm_channel(ALICE))
    fake.gateway.resume_gate = asyncio.Event()
    fake.gateway.replay_overlap = 1  # Discord may send an already-seen event again

    await fake.drop_connection()
    await fake.dm(ALICE, "two")
    await fake.dm(ALICE, "three")
    fake.gateway.resume_gate.set()

    await replies_in(fake, fake.dm_channel(ALICE), 2)
    await fake.quiet()
    assert len(fake.gateway.resumes) == 1 and len(fake.gateway.identifies) == 1
    assert fake.gateway.replayed == 3
    assert [m.content for m in await stored(core)] == ["one", "two", "three"]
    assert len(chat_requests(scripted_llm)) == 2
    assert len(fake.sent_to(fake.dm_channel(ALICE))) == 2


async def test_stopping_answers_a_waiting_burst_before_closing(
    fake: FakeDiscord, core: Core, scripted_llm: ScriptedLLM
) -> None:
    point_at(core, fake, burst_window_seconds=30)
    async with running(core, fake):
        await fake.dm(ALICE, "one last thing before you go")

        async def waiting() -> bool:
            return [m.status for m in await stored(core)] == ["stored"]

        await eventually(waiting)
        assert fake.sent_to(fake.dm_channel(ALICE)) == []

    [reply] = fake.sent_to(fake.dm_channel(ALICE))
    assert answer_part(reply.content) == "Tell me more."
    assert [m.status for m in await stored(core)] == ["answered"]


async def test_configured_shards_run_an_auto_sharded_client(fake: FakeDiscord, core: Core) -> None:
    import discord  # after the adapter, which imports it without the audioop warning

    point_at(core, fake, discord_shard_count=2, discord_shard_ids="1")
    client = build_client(core.settings)
    assert isinstance(client, discord.AutoShardedClient)
    assert (client.shard_count, client.shard_ids) == (2, [1])

    async with running(core, fake):
        await fake.dm(ALICE, "hello from shard one")
        await replies_in(fake, fake.dm_channel(ALICE))

    assert [identify["shard"] for identify in fake.gateway.identifies] == [[1, 2]]
    assert discord.http.Route.BASE == "https://discord.com/api/v10"
