"""Correcting a memory in the person's own words: `/edit m12 new text`, and the ✏️ Edit
button of `/memory` (then an item's button), after which the person's next private
message is the new text.

An edit supersedes the memory (history kept, tier and pin carried over, source `user`
like `/remember`), records the message it came from, and can be undone.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.commands.base import (
    ButtonSpec,
    CommandDeps,
    CommandSource,
    make_buttons,
    parse_label,
    record_source,
)
from bot.commands.editing import CREATION, MAX_REMEMBER, NOT_ABOUT_YOU, not_found, undo_specs
from bot.domain import Reply
from memory.care.edits import EDIT_WAIT, await_edit, cancel_edit, take_edit
from memory.learning.system_claims import claims_power_over_system
from memory.store.errors import MemoryNotFound
from memory.store.items import MemoryItem
from memory.store.records import Inbound, Person
from memory.store.statuses import COMMAND

USAGE = (
    "Tell me which memory to change and what it should say: /edit m12 my sister's "
    "birthday is 5 May. The ids are in /memory (or press ✏️ Edit there)."
)
MAX_EDIT = MAX_REMEMBER
WAIT_MINUTES = int(EDIT_WAIT.total_seconds() // 60)


async def edit_command(
    deps: CommandDeps, person: Person, args: str, source: CommandSource
) -> Reply:
    """`/edit m12 new text`."""
    label, _, text = args.strip().partition(" ")
    short_id = parse_label(label) if label else None
    if short_id is None:
        return Reply(USAGE, private=True)
    text = text.strip()
    if not text:
        return Reply(
            f"What should m{short_id} say now? Send /edit m{short_id} and the new text, or "
            "press ✏️ Edit under /memory.",
            private=True,
        )
    checked = await _editable(deps, person, short_id, text)
    if isinstance(checked, Reply):
        return checked
    message_id = await record_source(deps, person, source)
    return await _apply(deps, person, checked, text, [message_id])


async def pick(deps: CommandDeps, person: Person, short_ids: Sequence[int]) -> Reply:
    """The ✏️ button under `/memory`: which of the memories shown to change."""
    found = [await deps.memories.get(person.id, short_id) for short_id in short_ids[:10]]
    items = [item for item in found if item is not None and item.live]
    if not items:
        return Reply("Those memories have changed since. /memory shows them now.", private=True)
    specs = [ButtonSpec(f"✏️ {m.label}", "edit", {"m": m.short_id}) for m in items]
    listing = "\n".join(f"{m.label} · {m.content}" for m in items)
    buttons = await make_buttons(deps, person, [specs[i : i + 5] for i in range(0, len(specs), 5)])
    return Reply(f"Which one should I change?\n{listing}", buttons, private=True)


async def ask_for_text(deps: CommandDeps, person: Person, short_id: int) -> Reply:
    """The Edit button: wait for the person's next private message as the new text."""
    item = await deps.memories.get(person.id, short_id)
    if item is None or not item.live:
        return not_found(f"m{short_id}")
    await await_edit(deps.sessions, user_id=person.id, short_id=short_id, now=deps.clock.now())
    return Reply(
        f"What should {item.label} say instead of “{item.content}”? Send me the new text in "
        f"our private chat within {WAIT_MINUTES} minutes — or /cancel to leave it as it is.",
        private=True,
    )


async def cancel_command(deps: CommandDeps, person: Person, args: str) -> Reply:
    """`/cancel`: stop waiting for an edit's new text."""
    waiting = await cancel_edit(deps.sessions, user_id=person.id, now=deps.clock.now())
    if waiting is None:
        return Reply("There's nothing to cancel.", private=True)
    return Reply(f"Cancelled — m{waiting} stays as it was.", private=True)


async def stop_waiting(deps: CommandDeps, person: Person) -> None:
    """Any other command ends the wait for an edit's new text."""
    await cancel_edit(deps.sessions, user_id=person.id, now=deps.clock.now())


class EditIntake:
    """Takes the message a person sent after pressing Edit as the memory's new text."""

    def __init__(self, deps: CommandDeps) -> None:
        self._deps = deps

    async def complete(self, inbound: Inbound) -> Reply | None:
        """Apply the waiting edit with this message; None when the wait ended meanwhile
        (the message is then answered as conversation)."""
        deps, person, message = self._deps, inbound.person, inbound.message
        short_id = inbound.pending_edit
        if short_id is None or not await take_edit(
            deps.sessions, user_id=person.id, short_id=short_id, now=deps.clock.now()
        ):
            return None
        # The message is the new text, not conversation: never a turn in a prompt.
        await deps.store.mark_message(user_id=person.id, message_id=message.id, status=COMMAND)
        text = message.content.strip()
        checked = await _editable(deps, person, short_id, text)
        if isinstance(checked, Reply):
            return Reply(
                f"{checked.text}\nNothing was changed; press ✏️ Edit under /memory to try again.",
                private=True,
            )
        return await _apply(deps, person, checked, text, [message.id])


async def _editable(
    deps: CommandDeps, person: Person, short_id: int, text: str
) -> MemoryItem | Reply:
    """The current memory `short_id` if `text` may replace it, else why not."""
    if len(text) > MAX_EDIT:
        return Reply(
            f"That's too long for one memory ({len(text):,} characters; the most is "
            f"{MAX_EDIT}). Could you say it in a sentence or two?",
            private=True,
        )
    if claims_power_over_system(text):
        return Reply(NOT_ABOUT_YOU, private=True)
    item = await deps.memories.get(person.id, short_id)
    if item is None:
        return not_found(f"m{short_id}")
    if not item.live:
        return Reply(
            f"m{short_id} isn't a current memory any more (it was changed or forgotten), so "
            "there's nothing to edit. /memory lists what I remember now.",
            private=True,
        )
    if item.content.strip() == text:
        return Reply(f"{item.label} already says that — nothing changed.", private=True)
    return item


async def _apply(
    deps: CommandDeps, person: Person, item: MemoryItem, text: str, sources: Sequence[int]
) -> Reply:
    try:
        edited = await deps.memories.edit(
            person.id, item.short_id, text, source_message_ids=sources
        )
    except MemoryNotFound:  # changed or forgotten meanwhile
        return not_found(item.label)
    specs = await undo_specs(deps, person, [edited], CREATION, labelled=False)
    buttons = await make_buttons(deps, person, [specs])
    return Reply(
        f"Updated: “{edited.content}” (now {edited.label}; it said “{item.content}”, "
        f"which stays in its history).",
        buttons,
        private=True,
    )
