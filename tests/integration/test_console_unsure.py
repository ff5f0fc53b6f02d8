""" "Did I get this right?" in the terminal chat: the question arrives as a message of the
companion's own with numbered choices ✓ / ✗ / Edit, and typing 1 confirms it."""

from __future__ import annotations

from pathlib import Path

from adapters.console.chat import ConsoleChat
from bot.bootstrap import Core
from memory.store.items import Candidate
from tests.integration.test_console_choices import chat
from tests.support.catalog import user_id_of


async def test_the_question_is_answered_by_number_in_the_terminal(
    core: Core, tmp_path: Path
) -> None:
    async def ask(console: ConsoleChat) -> None:
        user_id = await user_id_of(core.sessions, "alice")
        content = "The person may be taking up the cello"
        candidate = Candidate(content, "fact", "core", 6, 0.6, unsure=True)
        await core.memories.add(user_id, candidate, source="extracted", actor="extraction")
        (person,) = await core.store.persons_by_ids([user_id])
        assert await core.memory.ask_unsure(person)

    out = await chat(core, tmp_path, ["/timezone UTC", ask, "1"])
    assert "Did I get this right? I noted “The person may be taking up the cello” (m1)" in out
    assert "[1] ✓ Yes" in out and "[2] ✗ No" in out and "[3] ✏️ Edit" in out
    assert "Thanks — I'll keep it in mind: “The person may be taking up the cello” (m1)." in out
    item = await core.memories.get(await user_id_of(core.sessions, "alice"), 1)
    assert item is not None and not item.unsure
