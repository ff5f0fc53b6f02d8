"""`/link` across platforms with the Telegram and the Discord adapters running in one
process against their loopback fakes: a code asked for on Telegram links Discord, a fact
said on Telegram reaches the Discord prompt, two linked pairs stay apart, and `/forget
all` on Discord leaves no row of the Telegram account."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from bot.bootstrap import Core
from tests.e2e.test_discord_bot import ALICE as DISCORD_ALICE
from tests.e2e.test_discord_bot import BOB as DISCORD_BOB
from tests.e2e.test_discord_bot import last_chat_prompt, point_at, replies_in
from tests.e2e.test_discord_bot import running as discord_running
from tests.e2e.test_discord_commands import button
from tests.e2e.test_discord_interactions import answered, message_of
from tests.e2e.test_telegram import ALICE, BOB
from tests.e2e.test_telegram import running as telegram_running
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.discord_api import FakeDiscord, SentMessage
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.integration.test_linking import CODE
from tests.support.catalog import rows_mentioning, rows_per_table, user_id_of


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeTelegramAPI, FakeDiscord]]:
    """Both platforms' fakes, and both adapters running against them in this process."""
    async with FakeTelegramAPI() as telegram, FakeDiscord(heartbeat_ms=500) as discord:
        yield telegram, discord


@contextlib.asynccontextmanager
async def both(core: Core, telegram: FakeTelegramAPI, discord: FakeDiscord) -> AsyncIterator[None]:
    """The Telegram and the Discord adapter, started and stopped together."""
    point_at(core, discord)
    async with telegram_running(core, telegram), discord_running(core, discord):
        yield


async def on_telegram(telegram: FakeTelegramAPI, user: int, text: str) -> str:
    """`user` writes privately on Telegram; the text of the answer."""
    before = len(telegram.sent[user])
    telegram.push_message(user, text)
    return (await telegram.wait_for_sent(user, before + 1))[-1].text


async def on_discord(discord: FakeDiscord, user: int, text: str) -> SentMessage:
    """`user` writes in their Discord DM; the answer."""
    channel = discord.dm_channel(user)
    before = len(discord.sent_to(channel))
    await discord.dm(user, text)
    return (await replies_in(discord, channel, before + 1))[-1]


async def link(telegram: FakeTelegramAPI, discord: FakeDiscord, tg_user: int, dc_user: int) -> str:
    """Link the Telegram account to the Discord one; the answer on Discord."""
    asked = CODE.search(await on_telegram(telegram, tg_user, "/link"))
    assert asked is not None
    return (await on_discord(discord, dc_user, f"/link {asked.group(1)}")).content


async def slash(
    discord: FakeDiscord, name: str, value: str, *, user: int = DISCORD_BOB, guild: bool = False
) -> SentMessage:
    """`user` runs `/name value` as a slash command; the (followed-up) answer."""
    interaction = await discord.slash(name, {"code": value}, user_id=user, guild=guild)
    return message_of((await answered(discord, interaction))[-1])


async def test_linked_accounts_share_memory_and_forget_all_on_discord_erases_telegram(
    core: Core, fakes: tuple[FakeTelegramAPI, FakeDiscord], scripted_llm: ScriptedLLM
) -> None:
    telegram, discord = fakes
    async with both(core, telegram, discord):
        await on_telegram(telegram, ALICE, "/remember I have a cat named Miso")
        await on_discord(discord, DISCORD_ALICE, "hello")
        assert "now one person" in await link(telegram, discord, ALICE, DISCORD_ALICE)
        person = await user_id_of(core.sessions, str(ALICE))
        assert await user_id_of(core.sessions, str(DISCORD_ALICE)) == person

        await on_discord(discord, DISCORD_ALICE, "what should I feed my cat?")
        assert "cat named Miso" in last_chat_prompt(scripted_llm)

        confirm = await on_discord(discord, DISCORD_ALICE, "/forget all")
        pressed = await discord.press(confirm, button(confirm, "Yes"), user_id=DISCORD_ALICE)
        assert "erased everything" in message_of((await answered(discord, pressed))[1]).content
    left = await rows_per_table(core.sessions, person)
    assert {table: n for table, n in left.items() if n} == {}
    assert await rows_mentioning(core.sessions, str(ALICE)) == {}
    assert await rows_mentioning(core.sessions, "Miso") == {}


async def test_two_linked_pairs_stay_apart(
    core: Core, fakes: tuple[FakeTelegramAPI, FakeDiscord], scripted_llm: ScriptedLLM
) -> None:
    telegram, discord = fakes
    async with both(core, telegram, discord):
        await on_telegram(telegram, ALICE, "/remember I have a cat named Miso")
        await on_telegram(telegram, BOB, "/remember I have a parrot named Kiwi")
        assert "now one person" in await link(telegram, discord, ALICE, DISCORD_ALICE)
        # Bob links with Discord's slash command: refused in a server (ephemerally, and
        # the code is void), accepted in the DM with a fresh code.
        asked = CODE.search(await on_telegram(telegram, BOB, "/link"))
        assert asked is not None
        public = await slash(discord, "link", asked.group(1), user=DISCORD_BOB, guild=True)
        assert public.ephemeral_flag and "only work in a private chat" in public.content
        assert "now one person" not in (await slash(discord, "link", asked.group(1))).content
        asked = CODE.search(await on_telegram(telegram, BOB, "/link"))
        assert asked is not None
        linked = await slash(discord, "link", asked.group(1), user=DISCORD_BOB)
        assert "now one person" in linked.content

        await on_discord(discord, DISCORD_BOB, "how are my pets?")
        bobs = last_chat_prompt(scripted_llm)
        await on_discord(discord, DISCORD_ALICE, "how are my pets?")
        alices = last_chat_prompt(scripted_llm)
        assert "Kiwi" in bobs and "Miso" not in bobs
        assert "Miso" in alices and "Kiwi" not in alices
        assert "Kiwi" not in (await on_discord(discord, DISCORD_ALICE, "/memory")).content
    alice = await user_id_of(core.sessions, str(DISCORD_ALICE))
    bob = await user_id_of(core.sessions, str(DISCORD_BOB))
    assert alice == await user_id_of(core.sessions, str(ALICE)) != bob
    assert bob == await user_id_of(core.sessions, str(BOB))
