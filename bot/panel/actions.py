"""What the memory panel does, each through the same use case as the slash command:
edit (`/edit`), pin and unpin (`/pin`, `/unpin`), forget (`/forget`) with undo, confirm
or reject an unsure memory, clear everything (forget each, undoable), export (`/export`).

Results are plain values with a short message; the adapter turns them into JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from bot import metrics
from bot.commands import account, edit, editing
from bot.commands.base import CommandDeps, CommandSource
from bot.domain import Document
from bot.panel.view import PanelView, build_view
from memory.learning.affirmation import affirm_memory
from memory.store.diary import recent_entries
from memory.store.errors import MemoryNotFound, NothingToUndo
from memory.store.items import MemoryItem
from memory.store.panel_reads import panel_snapshot
from memory.store.records import Person

log = structlog.get_logger(__name__)

PANEL_PLATFORM = "panel"  # where a change made in the panel came from, in its provenance
MAX_BULK = 500  # memories forgotten together by selection
MAX_CLEAR = 5000
DIARY_DAYS = 14


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a change did: a message for the person, and the events that undo it."""

    ok: bool
    message: str
    undo: tuple[int, ...] = ()


def _missing() -> Outcome:
    return Outcome(False, "That memory isn't there any more. The list is now up to date.")


async def show(deps: CommandDeps, person: Person) -> PanelView:
    """Everything the panel shows."""
    snapshot = await panel_snapshot(deps.sessions, person.id)
    diary = await recent_entries(deps.sessions, user_id=person.id, limit=DIARY_DAYS)
    return build_view(person, snapshot, diary, pin_limit=deps.pin_limit)


async def _live(deps: CommandDeps, person: Person, short_id: int) -> MemoryItem | None:
    item = await deps.memories.get(person.id, short_id)
    return item if item is not None and item.live else None


async def _shown(deps: CommandDeps, person: Person, short_id: int) -> MemoryItem | None:
    """A memory the panel shows (current, live or faded), by short id."""
    item = await deps.memories.get(person.id, short_id)
    current = item is not None and item.valid_until is None and item.status != "forgotten"
    return item if current else None


async def edit_text(deps: CommandDeps, person: Person, short_id: int, text: str) -> Outcome:
    """Correct a memory in the person's words (supersede, history kept), as `/edit`."""
    text = " ".join(text.split())
    if not text:
        return Outcome(False, "A memory can't be empty. To let it go, use Forget.")
    before = await _live(deps, person, short_id)
    if before is None:
        return _missing()
    source = CommandSource(PANEL_PLATFORM, None, f"/edit m{short_id} {text}")
    reply = await edit.edit_command(deps, person, f"m{short_id} {text}", source)
    after = await deps.memories.get(person.id, short_id)
    changed = after is not None and after.valid_until is not None
    return Outcome(changed, reply.text)


async def set_pin(deps: CommandDeps, person: Person, short_id: int, pinned: bool) -> Outcome:
    """Pin (within the pin limit) or unpin a memory, as `/pin` and `/unpin`."""
    item = await _live(deps, person, short_id)
    if item is None:
        return _missing()
    reply = await (editing.pin if pinned else editing.unpin)(deps, person, item)
    now = await deps.memories.get(person.id, short_id)
    return Outcome(now is not None and now.pinned == pinned, reply.text)


async def forget(deps: CommandDeps, person: Person, short_ids: Sequence[int]) -> Outcome:
    """Forget one or several memories, as `/forget` (the words they came from go too);
    the outcome carries the events that bring them back."""
    items = [item for s in short_ids if (item := await _shown(deps, person, s))]
    if not items:
        return _missing()
    for item in items:
        await deps.memories.forget(person.id, item.short_id)
        if item.unsure:
            metrics.record_unsure("rejected")
    events = await deps.memories.last_events(person.id, [i.id for i in items], ("forget",))
    count = len(items)
    message = f"Forgotten: “{items[0].content}”." if count == 1 else f"Forgotten: {count} memories."
    log.info("panel.forgotten", user_id=person.id, count=count)
    return Outcome(True, message, tuple(events[i.id] for i in items if i.id in events))


async def undo(deps: CommandDeps, person: Person, event_ids: Sequence[int]) -> Outcome:
    """Reverse changes by their events, latest first, as the Undo buttons do."""
    undone = 0
    for event_id in sorted(set(event_ids[:MAX_CLEAR]), reverse=True):
        try:
            await deps.memories.undo(person.id, event_id)
        except (MemoryNotFound, NothingToUndo):
            continue
        undone += 1
    if not undone:
        return Outcome(False, "That was already undone, or can't be undone any more.")
    back = "it's back as it was" if undone == 1 else f"{undone} memories are back"
    return Outcome(True, f"Undone — {back}.")


async def confirm(deps: CommandDeps, person: Person, short_id: int) -> Outcome:
    """The person says an unsure memory is right."""
    item = await _live(deps, person, short_id)
    if item is None:
        return _missing()
    if await affirm_memory(deps.memories, person.id, short_id, via="panel") is None:
        return _missing()
    if item.unsure:
        metrics.record_unsure("confirmed")
    return Outcome(True, f"Thanks — I'm sure of “{item.content}” now.")


async def clear_all(deps: CommandDeps, person: Person) -> Outcome:
    """Forget every memory the panel shows (each into the trash, undoable together)."""
    snapshot = await panel_snapshot(deps.sessions, person.id)  # live and faded
    if not snapshot.items:
        return Outcome(False, "There's nothing to clear.")
    return await forget(deps, person, [item.short_id for item in snapshot.items[:MAX_CLEAR]])


async def export(deps: CommandDeps, person: Person) -> Document:
    """Everything kept about the person, as `/export` hands it over."""
    reply = await account.export(deps, person)
    assert reply.document is not None
    return reply.document
