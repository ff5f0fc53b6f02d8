"""`/memory` shows an "Ongoing" group: each live thread with its latest item, on Telegram,
Discord and the terminal alike, through the real core on real PostgreSQL. A thread with a
forgotten memory, or with nothing live left, is not shown."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import select

from bot.bootstrap import Core
from bot.commands.ongoing import ONGOING
from memory.store.items import Candidate
from memory.store.tables import Identity, Thread
from tests.e2e import test_discord_bot as discord_e2e
from tests.e2e import test_telegram as telegram_e2e
from tests.e2e.test_discord_commands import command
from tests.e2e.test_discord_commands import remember as remember_on_discord
from tests.e2e.test_telegram_commands import remember as remember_on_telegram
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.integration.test_console_choices import chat

SHOWN = (
    "Moving to Aarhus (2 items, last 1 Mar) — latest: m3 · The person bought a blue cargo bicycle"
)


async def _thread(core: Core, user_id: int, title: str, seen_days_ago: int) -> int:
    async with core.sessions.begin() as db:
        row = Thread(
            user_id=user_id,
            title=title,
            last_seen_at=core.clock.now() - timedelta(days=seen_days_ago),
        )
        db.add(row)
        await db.flush()
        return row.id


async def _item(core: Core, user_id: int, content: str, thread_id: int) -> int:
    candidate = Candidate(content, "thread", "active", 6, 0.9, thread_id=thread_id)
    item = await core.memories.add(user_id, candidate, source="extracted", actor="extraction")
    return item.short_id


async def seed(core: Core, user_id: int) -> None:
    """Alice (who has m1 already): an ongoing thread of two items (m2, m3), seen
    yesterday (the clock's Monday 2 March, UTC), and one tainted by a forgotten memory."""
    aarhus = await _thread(core, user_id, "Moving to Aarhus", 1)
    await _item(core, user_id, "The person signed the lease on a flat in Aarhus", aarhus)
    await _item(core, user_id, "The person bought a blue cargo bicycle", aarhus)
    secret = await _thread(core, user_id, "Surprise party for Maja", 0)
    await _item(core, user_id, "The person plans a surprise party", secret)
    await _item(core, user_id, "The person booked the venue", secret)
    await core.memories.forget(user_id, 4)


def check(shown: str) -> None:
    lines = shown.splitlines()
    assert ONGOING in lines
    after = lines[lines.index(ONGOING) + 1 :]
    assert after[0] == SHOWN
    assert "Surprise party" not in shown  # its thread has a forgotten memory


async def test_ongoing_on_telegram(core: Core) -> None:
    async with FakeTelegramAPI() as fake, telegram_e2e.running(core, fake):
        await remember_on_telegram(core, telegram_e2e.ALICE, "I keep bees")
        user_id = (await telegram_e2e.identity(core.sessions, telegram_e2e.ALICE)).user_id
        await seed(core, user_id)
        fake.push_message(telegram_e2e.ALICE, "/memory")
        [message] = await fake.wait_for_sent(telegram_e2e.ALICE)
    check(message.text)


async def test_ongoing_on_discord(core: Core) -> None:
    async with FakeDiscord() as fake:
        discord_e2e.point_at(core, fake)
        async with discord_e2e.running(core, fake):
            await remember_on_discord(core, fake, discord_e2e.ALICE, "I keep bees")
            async with core.sessions() as db:
                user_id = await db.scalar(
                    select(Identity.user_id).where(Identity.platform == "discord")
                )
            assert user_id is not None
            await seed(core, user_id)
            page = await command(fake, "memory")
    check(page.content)


async def test_ongoing_in_the_terminal(core: Core, tmp_path: Path) -> None:
    async def seeded(console: object) -> None:
        async with core.sessions() as db:
            user_id = await db.scalar(
                select(Identity.user_id).where(Identity.platform == "console")
            )
        assert user_id is not None
        await seed(core, user_id)

    out = await chat(core, tmp_path, ["/remember I keep bees", seeded, "/memory"])
    check(out.split("companion> What I remember about you", 1)[1])
