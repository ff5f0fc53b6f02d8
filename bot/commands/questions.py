"""Asking before changing what the person set themselves: when their new words
contradict a memory they stated explicitly or pinned, one question with Yes / No."""

from __future__ import annotations

from typing import Any

from bot.commands.base import ButtonSpec, CommandDeps, make_buttons
from bot.domain import Reply
from memory.learning.questions import answer_update
from memory.store.items import UpdateQuestion
from memory.store.records import Person

MAX_QUOTED = 200


def _quote(text: str) -> str:
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 1] + "…"


async def update_question(deps: CommandDeps, person: Person, question: UpdateQuestion) -> Reply:
    """ "You told me X; now you said Y — update it?" with Yes and No."""
    specs = [
        ButtonSpec("Yes, update it", "update_yes", {"q": question.id}),
        ButtonSpec("No, keep it", "update_no", {"q": question.id}),
    ]
    buttons = await make_buttons(deps, person, [specs])
    text = (
        f"You told me “{_quote(question.old)}” ({question.memory_label}); now you said "
        f"“{_quote(question.new)}” — update it?"
    )
    return Reply(text, buttons, private=True)


async def answer(deps: CommandDeps, person: Person, payload: dict[str, Any], accept: bool) -> Reply:
    """Yes: the new words become the memory (history kept). No: it stays as it was."""
    answered = await answer_update(
        deps.sessions,
        deps.memories,
        user_id=person.id,
        question_id=int(payload.get("q", 0)),
        accept=accept,
    )
    item = answered.item
    if answered.result == "accepted" and item is not None:
        return Reply(f"Updated — I'll remember: “{item.content}” ({item.label}).", private=True)
    if answered.result == "declined" and item is not None:
        return Reply(f"Kept as it was: “{item.content}” ({item.label}).", private=True)
    if answered.result == "already":
        return Reply("You already answered that one.", private=True)
    return Reply("That memory has changed since I asked, so I left it as it is.", private=True)
