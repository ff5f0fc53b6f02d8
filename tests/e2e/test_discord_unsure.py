""" "Did I get this right?" through Discord: the question about an unsure memory arrives
in the DM with ✓ / ✗ / Edit buttons, and ✓ affirms the memory (checked in the
database)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from bot.bootstrap import Core
from bot.domain import IncomingMessage
from memory.store.items import Candidate
from memory.store.tables import Identity
from tests.conftest import FakeClock
from tests.e2e.test_discord_bot import ALICE, point_at, replies_in, running
from tests.e2e.test_discord_interactions import answered, message_of
from tests.fakes.discord_api import FakeDiscord


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    """The fake Discord (REST and gateway) on a loopback port."""
    async with FakeDiscord() as api:
        yield api


@pytest.fixture
async def bot(core: Core, fake: FakeDiscord) -> AsyncIterator[None]:
    """The adapter, running against the fake."""
    point_at(core, fake)
    async with running(core, fake):
        yield


async def test_an_unsure_memory_is_confirmed_with_its_button_in_the_dm(
    bot: None, fake: FakeDiscord, core: Core, clock: FakeClock
) -> None:
    channel = fake.dm_channel(ALICE)
    await core.router.handle(
        IncomingMessage("discord", str(ALICE), "/timezone UTC", chat_id=str(channel))
    )
    async with core.sessions() as db:
        user_id = await db.scalar(select(Identity.user_id).where(Identity.platform == "discord"))
    assert user_id is not None
    content = "The person may be taking up the cello"
    candidate = Candidate(content, "fact", "core", 6, 0.6, unsure=True)
    await core.memories.add(user_id, candidate, source="extracted", actor="extraction")

    (person,) = await core.store.persons_by_ids([user_id])
    assert await core.memory.ask_unsure(person)
    [question] = await replies_in(fake, channel)
    assert question.content.startswith("Did I get this right?")
    assert question.labels == ["✓ Yes", "✗ No", "✏️ Edit"]

    pressed = await fake.press(question, question.custom_ids[0], user_id=ALICE)
    answer = message_of((await answered(fake, pressed))[1])
    assert answer.content.startswith("Thanks — I'll keep it in mind")
    item = await core.memories.get(user_id, 1)
    assert item is not None and not item.unsure and item.last_confirmed_at == clock.now()
