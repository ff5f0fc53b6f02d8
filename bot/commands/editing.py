"""Changing what is remembered: `/forget`, `/pin`, `/unpin`, `/remember`, restore and
undo (`/edit` is in `bot.commands.edit`). Every change is a memory event, and every one
of them can be undone."""

from __future__ import annotations

from collections.abc import Sequence

from bot import metrics
from bot.commands.base import (
    MAX_SEARCH,
    ButtonSpec,
    CommandDeps,
    CommandSource,
    make_buttons,
    parse_label,
    record_source,
)
from bot.domain import Reply
from memory.learning.extraction import remember_explicit
from memory.store.errors import MemoryNotFound, NotAboutThePerson, NothingToUndo, PinLimitReached
from memory.store.items import MemoryItem
from memory.store.records import Person

USAGE = {
    "forget": "Tell me what to forget: /forget m12 (an id from /memory), /forget my old "
    "address (words), or /forget all.",
    "pin": "Tell me what to pin: /pin m12 (an id from /memory) or /pin words from it.",
    "unpin": "Tell me what to unpin: /unpin m12 (an id from /memory) or /unpin words.",
    "remember": "Tell me what to remember: /remember my sister's birthday is 4 May.",
}
MAX_REMEMBER = 500
NOT_ABOUT_YOU = (
    "I keep memories about you and your life, so I haven't saved that: roles, rules or "
    "other people's data can't be set through memory. Try something like "
    "/remember I'm training for a half marathon in May."
)


def not_found(label: str) -> Reply:
    """The same answer for a missing id and for someone else's (no oracle)."""
    return Reply(f"I have no memory {label[:20]}. /memory lists what I remember.", private=True)


async def resolve_target(
    deps: CommandDeps, person: Person, args: str, verb: str
) -> MemoryItem | Reply:
    """The one live memory `args` names (by id or unique text), or a reply that explains."""
    text = args.strip()
    if not text:
        return Reply(USAGE[verb], private=True)
    if len(text) > MAX_SEARCH:
        return Reply(f"That's too long to search for. {USAGE[verb]}", private=True)
    short_id = parse_label(text)
    if short_id is not None:
        item = await deps.memories.get(person.id, short_id)
        return item if item is not None and item.live else not_found(text)
    found = await deps.memories.find_by_text(person.id, text, limit=9)
    if not found:
        return Reply(f"Nothing in my memory matches “{text[:60]}”. {USAGE[verb]}", private=True)
    if len(found) == 1:
        return found[0]
    specs = [ButtonSpec(f"{verb.title()} {m.label}", verb, {"m": m.short_id}) for m in found[:8]]
    listing = "\n".join(f"{m.label} · {m.content}" for m in found[:8])
    buttons = await make_buttons(deps, person, [specs[i : i + 4] for i in range(0, len(specs), 4)])
    return Reply(f"Several memories match — which one?\n{listing}", buttons, private=True)


CREATION = ("create", "supersede")  # the events that put a memory (version) in place


async def undo_specs(
    deps: CommandDeps,
    person: Person,
    items: Sequence[MemoryItem],
    actions: tuple[str, ...],
    *,
    labelled: bool = True,
) -> list[ButtonSpec]:
    """An Undo button per item (named after it when `labelled`), undoing its latest event
    among `actions`; undoing the creation of a new version brings the older one back."""
    events = await deps.memories.last_events(person.id, [i.id for i in items], actions)
    label = "↩ Undo {}" if labelled else "↩ Undo"
    return [
        ButtonSpec(label.format(i.label), "undo", {"event": events[i.id], "m": i.short_id})
        for i in items
        if i.id in events
    ]


async def _undo_button(deps: CommandDeps, person: Person, item: MemoryItem, *actions: str) -> Reply:
    specs = await undo_specs(deps, person, [item], actions, labelled=False)
    return Reply("", await make_buttons(deps, person, [specs]))


async def forget(deps: CommandDeps, person: Person, item: MemoryItem) -> Reply:
    """Forget one memory: out of every prompt and recall now, in the trash for 30 days."""
    forgotten = await deps.memories.forget(person.id, item.short_id)
    if item.unsure:
        metrics.record_unsure("rejected")
    undo = await _undo_button(deps, person, forgotten, "forget")
    text = (
        f"Forgotten: “{forgotten.content}” ({forgotten.label}). It won't come up again; it "
        "stays in /memory trash for 30 days in case you change your mind."
    )
    return Reply(text, undo.buttons, private=True)


async def restore(deps: CommandDeps, person: Person, short_id: int) -> Reply:
    """Take a memory out of the trash."""
    try:
        item = await deps.memories.restore(person.id, short_id)
    except MemoryNotFound:
        return not_found(f"m{short_id}")
    return Reply(f"Restored: “{item.content}” ({item.label}).", private=True)


async def pin(deps: CommandDeps, person: Person, item: MemoryItem) -> Reply:
    """Pin a memory: always in mind, never fades."""
    try:
        pinned = await deps.memories.pin(person.id, item.short_id, limit=deps.pin_limit)
    except PinLimitReached as exc:
        return Reply(
            f"You already have {exc.limit} pinned memories, the most I keep pinned. "
            "Unpin one first, e.g. /unpin m12.",
            private=True,
        )
    except MemoryNotFound:
        return not_found(item.label)
    undo = await _undo_button(deps, person, pinned, "pin")
    return Reply(f"📌 Pinned: “{pinned.content}” ({pinned.label}).", undo.buttons, private=True)


async def unpin(deps: CommandDeps, person: Person, item: MemoryItem) -> Reply:
    """Unpin a memory."""
    if not item.pinned:
        return Reply(f"{item.label} isn't pinned.", private=True)
    unpinned = await deps.memories.unpin(person.id, item.short_id)
    return Reply(f"Unpinned: “{unpinned.content}” ({unpinned.label}).", private=True)


async def undo(deps: CommandDeps, person: Person, event_id: int, short_id: int) -> Reply:
    """Reverse one change."""
    try:
        item = await deps.memories.undo(person.id, event_id)
    except (MemoryNotFound, NothingToUndo):
        return Reply("That was already undone, or can't be undone any more.", private=True)
    if item.live:
        return Reply(f"Undone — “{item.content}” ({item.label}) is back as it was.", private=True)
    return Reply(f"Undone — I've let go of “{item.content}” ({item.label}).", private=True)


async def remember(
    deps: CommandDeps, person: Person, args: str, source: CommandSource | None = None
) -> Reply:
    """Save something the person explicitly asked to remember; the command's text is kept
    as the memory's source (`source`), so forgetting the memory hides it too."""
    text = args.strip()
    if not text:
        return Reply(USAGE["remember"], private=True)
    if len(text) > MAX_REMEMBER:
        return Reply(
            f"That's too long to remember as one thing ({len(text):,} characters; the most is "
            f"{MAX_REMEMBER}). Could you say it in a sentence or two?",
            private=True,
        )
    sources = [await record_source(deps, person, source)] if source is not None else []
    try:
        item = await remember_explicit(
            user_id=person.id,
            text=text,
            memories=deps.memories,
            llm=deps.tool_caller,
            clock=deps.clock,
            timezone=person.timezone,
            source_message_ids=sources,
        )
    except NotAboutThePerson:
        return Reply(NOT_ABOUT_YOU, private=True)
    undo_reply = await _undo_button(deps, person, item, *CREATION)
    return Reply(
        f"Got it — I'll remember: “{item.content}” ({item.label}).",
        undo_reply.buttons,
        private=True,
    )


async def target_command(deps: CommandDeps, person: Person, args: str, verb: str) -> Reply:
    """`/forget`, `/pin` or `/unpin` with an id or text."""
    target = await resolve_target(deps, person, args, verb)
    if isinstance(target, Reply):
        return target
    action = {"forget": forget, "pin": pin, "unpin": unpin}[verb]
    return await action(deps, person, target)
