"""Firming up what the companion is not sure of: "Did I get this right?" with ✓ / ✗ /
Edit, and the ✓ (affirm) button itself. ✓ affirms the memory (the one rule in
`memory.learning.affirmation`), ✗ forgets it with its words as /forget does, Edit asks
for the new text as /memory's ✏️ does (the new version supersedes it)."""

from __future__ import annotations

from typing import Any

from bot import metrics
from bot.commands.base import ButtonSpec, CommandDeps, make_buttons
from bot.commands.editing import not_found
from bot.domain import Reply
from memory.learning.affirmation import affirm_memory
from memory.store.items import MemoryItem
from memory.store.records import Person

MAX_QUOTED = 300


def _quote(text: str) -> str:
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 1] + "…"


async def unsure_question(deps: CommandDeps, person: Person, item: MemoryItem) -> Reply:
    """ "Did I get this right? “…” (m12)" with ✓ Yes, ✗ No and ✏️ Edit."""
    specs = [
        ButtonSpec("✓ Yes", "affirm", {"m": item.short_id}),
        ButtonSpec("✗ No", "forget", {"m": item.short_id}),
        ButtonSpec("✏️ Edit", "edit", {"m": item.short_id}),
    ]
    buttons = await make_buttons(deps, person, [specs])
    text = (
        f"Did I get this right? I noted “{_quote(item.content)}” ({item.label}), but I'm not "
        "sure I understood you."
    )
    return Reply(text, buttons, private=True)


async def affirm_verb(deps: CommandDeps, person: Person, payload: dict[str, Any]) -> Reply:
    """✓: the memory is confirmed — surer, its fading restarted, kept in mind."""
    short_id = int(payload.get("m", 0))
    before = await deps.memories.get(person.id, short_id)
    item = await affirm_memory(deps.memories, person.id, short_id, via="button")
    if item is None:
        return not_found(f"m{short_id}")
    if before is not None and before.unsure:
        metrics.record_unsure("confirmed")
    text = f"Thanks — I'll keep it in mind: “{_quote(item.content)}” ({item.label})."
    return Reply(text, private=True)
