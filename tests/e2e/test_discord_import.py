"""Importing a DiscordChatExporter file sent as a DM attachment, end to end through the
real discord.py client and the loopback fake (the attachment fetched from its CDN):
what was found with a Start button, Start, progress edited into the same message."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from bot.bootstrap import Core
from memory.store.tables import Import, Message
from tests.e2e.test_discord_bot import ALICE, bot, fake, replies_in
from tests.e2e.test_discord_interactions import answered, message_of
from tests.fakes.discord_api import FakeDiscord

__all__ = ["bot", "fake"]  # the fixtures this module shares with test_discord_bot

DATA = Path(__file__).parents[1] / "data" / "imports"
OWN_EXPORT = (DATA / "discord_dm.json").read_bytes().replace(b'"444"', f'"{ALICE}"'.encode())


async def test_an_attachment_is_found_started_and_its_progress_edited(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    await fake.dm_file(ALICE, "rowan.json", OWN_EXPORT)
    [found] = await replies_in(fake, fake.dm_channel(ALICE))
    assert "I found 2 messages (a Discord export)" in found.content
    assert "You are Kit." in found.content
    assert found.labels == ["Start", "Cancel"]
    assert len(fake.downloads) == 1

    pressed = await fake.press(found, found.custom_ids[0], user_id=ALICE)
    started = message_of((await answered(fake, pressed))[1])
    assert "Learning from your import: 0%" in started.content
    assert core.importer is not None
    await core.importer.tick()
    await fake.wait_for(lambda: any("Finished learning" in text for _, text in fake.edits))
    assert fake.edits[-1][0] == found.id  # the same message, edited
    async with core.sessions() as db:
        roles = list(await db.scalars(select(Message.role).where(Message.import_id.is_not(None))))
        assert roles == ["other", "user"]
        assert await db.scalar(select(func.count(Import.id))) == 1


async def test_a_truncated_attachment_stores_nothing(
    bot: None, fake: FakeDiscord, core: Core
) -> None:
    await fake.dm_file(ALICE, "rowan.json", OWN_EXPORT[:-30])
    [refused] = await replies_in(fake, fake.dm_channel(ALICE))
    assert "ends in the middle" in refused.content
    async with core.sessions() as db:
        assert await db.scalar(select(func.count(Message.id))) == 0
