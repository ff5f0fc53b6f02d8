"""Memory notices: after an extraction pass that saved something, one short message
listing what was noted, with an Undo per item that undoes exactly what extraction did
(a new memory is let go; a new version gives way to the one it replaced); and the notice
under a reply of what the chat model's memory tools changed in that turn."""

from __future__ import annotations

from collections.abc import Sequence

from bot.commands.base import CommandDeps, make_buttons
from bot.commands.editing import CREATION, undo_specs
from bot.domain import Reply
from bot.memory_tools import ToolChange
from memory.store.items import MemoryItem
from memory.store.records import Person

MAX_LISTED = 8
FOOTER = "/memory shows everything; /settings turns these notes off."
HEADING = "I noted:"
AWAY_HEADING = "While you were away I noted:"


async def memory_notice(
    deps: CommandDeps, person: Person, items: Sequence[MemoryItem], *, heading: str = HEADING
) -> Reply:
    """The notice for what one extraction pass (or several, held for the person's
    window) stored: at most eight items listed, each with its Undo (made now, so it works
    however long the notice was held), and how many more there are."""
    listed = list(items[:MAX_LISTED])
    lines = "\n".join(f"• {item.content} ({item.label})" for item in listed)
    more = len(items) - len(listed)
    if more > 0:
        lines += f"\n…and {more} more — /memory lists them."
    specs = await undo_specs(deps, person, listed, CREATION)
    buttons = await make_buttons(deps, person, [specs[i : i + 4] for i in range(0, len(specs), 4)])
    return Reply(f"{heading}\n{lines}\n\n{FOOTER}", buttons, private=True)


TOOL_HEADING = "Memory changes I made just now:"
TOOL_FOOTER = "Undo anything I got wrong; /memory shows everything."
_UNDONE_BY = {"saved": CREATION, "updated": CREATION, "forgot": ("forget",)}


async def tool_notice(
    deps: CommandDeps, person: Person, changes: Sequence[ToolChange], *, quoting: bool = True
) -> Reply:
    """The short notice of what the chat model's memory tools changed in one turn, a line
    and an Undo button per change: undoing a saved memory lets it go, an update brings the
    old wording back, a forgotten memory comes back with its words. Without `quoting` (a
    notice held for later) a forgotten memory is named by its id, not its words."""
    lines, specs = [], []
    for change in changes[:MAX_LISTED]:
        item = change.item
        if change.kind == "updated" and change.previous is not None:
            lines.append(
                f"• Updated {change.previous.label}: “{item.content}” (now {item.label}; it "
                f"said “{change.previous.content}”)"
            )
        elif change.kind == "forgot" and not quoting:
            lines.append(f"• Forgot {item.label} (in /memory trash for 30 days)")
        elif change.kind == "forgot":
            lines.append(f"• Forgot: “{item.content}” ({item.label}; in /memory trash for 30 days)")
        else:
            lines.append(f"• Saved: “{item.content}” ({item.label})")
        specs += await undo_specs(deps, person, [item], _UNDONE_BY[change.kind])
    more = len(changes) - len(lines)
    if more > 0:
        lines.append(f"…and {more} more — /memory lists them.")
    buttons = await make_buttons(deps, person, [specs[i : i + 4] for i in range(0, len(specs), 4)])
    body = "\n".join(lines)
    return Reply(f"{TOOL_HEADING}\n{body}\n\n{TOOL_FOOTER}", buttons, private=True)
