"""Importing a chat export sent as a Telegram document, end to end through the real
python-telegram-bot against the loopback Bot API (getFile and the file download): what
was found with a Start button, someone else's export, groups, bad files, progress edits
of one message, and undo."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.bootstrap import Core
from bot.llm import LLMRequest
from memory.store.tables import Import, Memory, Message
from tests.e2e.test_telegram import ALICE, running
from tests.fakes.chat_llm import ScriptedLLM
from tests.fakes.quoted import quoted_messages
from tests.fakes.telegram_api import FakeTelegramAPI

DATA = Path(__file__).parents[1] / "data" / "imports"
GROUP = -1001234567890
OWN_EXPORT = (DATA / "telegram_result.json").read_bytes().replace(b"user111000111", b"user1001")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    """The fake Bot API."""
    async with FakeTelegramAPI() as api:
        yield api


async def count(core: Core, column: object) -> int:
    async with core.sessions() as db:
        return int(await db.scalar(select(func.count(column))) or 0)  # type: ignore[arg-type]


def person_lines(request: LLMRequest) -> dict[str, object]:
    """The fast model: each of THE PERSON's messages, remembered as told."""
    prompt = request.turns[0].content
    found = []
    for said in quoted_messages(prompt.split("<conversation>", 1)[-1]):
        if said.sender != "person" or said.id is None:
            continue
        found.append(
            {
                "content": f"The person told a friend: {said.text}",
                "category": "fact",
                "tier": "core",
                "importance": 6,
                "confidence": 0.9,
                "evidence_message_ids": [said.id],
            }
        )
    return {"memories": found}


async def test_own_export_found_started_progress_and_undone(
    core: Core, fake: FakeTelegramAPI, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.tools["record_memories"] = person_lines
    async with running(core, fake):
        fake.push_document(ALICE, "result.json", OWN_EXPORT)
        [found] = await fake.wait_for_sent(ALICE)
        assert "I found 4 messages (a Telegram export)" in found.text
        assert "Ana Lima (2), Sam Rivers (2)" in found.text
        assert "model calls" in found.text and "$" in found.text
        assert "You are Sam Rivers." in found.text
        assert [label for row in found.buttons for label, _ in row] == ["Start", "Cancel"]
        assert await count(core, Memory.id) == 0  # nothing learned before Start

        fake.push_callback(ALICE, found.action("Start"), found.message_id)
        await fake.wait_for(lambda: "Learning from your import: 0%" in found.text)
        assert core.importer is not None
        assert await core.importer.tick() == 1
        await fake.wait_for(lambda: "Learning from your import: 75% (3 of 4" in found.text)
        await core.importer.tick()
        await fake.wait_for(lambda: "Finished learning from the 4" in found.text)
        assert len(fake.sent[ALICE]) == 1  # one message, edited in place
        async with core.sessions() as db:
            learned = list(await db.scalars(select(Memory.content)))
        assert any("Crumb & Co" in text for text in learned)
        assert not any("peanuts" in text for text in learned)  # Ana's words: context

        fake.push_message(ALICE, "/import undo")
        [_, undone] = await fake.wait_for_sent(ALICE, 2)
        assert f"4 messages and the {len(learned)} memories" in undone.text
        assert await count(core, Memory.id) == 0
        assert await count(core, Import.id) == 0
        assert await count(core, Message.import_id) == 0


async def test_someone_elses_export_asks_who_the_person_is(
    core: Core, fake: FakeTelegramAPI
) -> None:
    async with running(core, fake):
        fake.push_document(ALICE, "result.json", (DATA / "hostile_result.json").read_bytes())
        [asked] = await fake.wait_for_sent(ALICE)
        assert "Which of these is you?" in asked.text
        labels = [label for row in asked.buttons for label, _ in row]
        assert labels[-1] == "Cancel" and "Sam Rivers" in labels
        assert "<script>" in asked.text  # shown as text, never as markup
        fake.push_callback(ALICE, asked.action("Sam Rivers"), asked.message_id)
        await fake.wait_for(lambda: "You are Sam Rivers." in asked.text)
        fake.push_callback(ALICE, asked.action("Cancel"), asked.message_id)
        await fake.wait_for(lambda: "Removed the import: 3 messages" in asked.text)
        assert await count(core, Message.id) == 0


async def test_groups_and_bad_files_store_nothing(core: Core, fake: FakeTelegramAPI) -> None:
    async with running(core, fake):
        fake.push_document(
            ALICE,
            "result.json",
            OWN_EXPORT,
            chat_id=GROUP,
            chat_type="supergroup",
            reply_to_bot=True,
        )
        [refused] = await fake.wait_for_sent(GROUP)
        assert "only import chat history in our private chat" in refused.text
        fake.push_document(ALICE, "result.json", OWN_EXPORT[:-60])
        [truncated] = await fake.wait_for_sent(ALICE)
        assert "ends in the middle" in truncated.text
        fake.push_document(ALICE, "big.json", b"{}", file_size=60_000_000)  # over 50 MB
        [_, large] = await fake.wait_for_sent(ALICE, 2)
        assert "too large" in large.text
        fake.push_document(ALICE, "photo.json", b"\x89PNG\r\n\x1a\n\x00\x00")
        [_, _, png] = await fake.wait_for_sent(ALICE, 3)
        assert "couldn't read that file as a chat export" in png.text
    assert len(fake.downloads) == 2  # the group's and the oversized file never fetched
    assert await count(core, Message.id) == 0
    assert await count(core, Import.id) == 0
