"""`/memory`: what is remembered, grouped by tier, paginated, with buttons to forget or
pin each item and one to pick an item to edit; `/memory trash` to restore what was forgotten."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.commands.base import (
    MAX_SEARCH,
    ButtonSpec,
    CommandDeps,
    CommandSource,
    is_number,
    make_buttons,
    parse_label,
)
from bot.commands.ongoing import ongoing_group
from bot.domain import Button, Reply
from bot.panel.links import BUTTON_LABEL
from memory.local_time import zone_of
from memory.store.items import MemoryItem
from memory.store.records import Person

EMPTY_MEMORY = (
    "I don't remember anything about you yet.\n\n"
    "As we talk, I note what matters — people in your life, plans, how things are going — "
    "and keep it so I can follow up. You can always see it here, /pin what matters most, "
    "/forget anything, or tell me directly with /remember."
)
GROUPS: tuple[tuple[str, Callable[[MemoryItem], bool]], ...] = (
    ("📌 Pinned", lambda m: m.pinned),
    ("About you", lambda m: m.tier == "core" and m.category in {"identity", "fact"}),
    ("People in your life", lambda m: m.tier == "core" and m.category == "relationship"),
    ("What you like", lambda m: m.tier == "core" and m.category == "preference"),
    ("Coming up and recent", lambda m: m.tier == "active" and m.category == "event"),
    ("Going on now", lambda m: m.tier == "active" and m.category != "event"),
)
TIER_WORDS = {"core": "core", "active": "active", "pinned": "pinned"}
MAX_ITEMS = 1000


def group_of(item: MemoryItem) -> int:
    """Index of the group an item is shown under."""
    return next(i for i, (_, test) in enumerate(GROUPS) if test(item) or i == len(GROUPS) - 1)


def sort_key(item: MemoryItem) -> tuple[int, float, float]:
    """Groups in order; events by date; otherwise the most important first."""
    when = item.event_at.timestamp() if item.event_at else 0.0
    return (group_of(item), when if item.category == "event" else 0.0, -item.importance)


def describe(item: MemoryItem, zone: ZoneInfo, now: datetime) -> str:
    """'m12 · Job interview at Acme — Fri 6 Mar · fades 9 Mar · I noticed, 2 Mar (90%
    sure) · confirmed 4 Mar'; an unsure item says 'not sure (60%)' instead."""
    parts = [f"{item.label} · {item.content}"]
    if item.event_at is not None:
        parts[0] += f" — {item.event_at.astimezone(zone):%a %-d %b}"
    if item.expires_at is not None and not item.pinned:
        parts.append(f"fades {item.expires_at.astimezone(zone):%-d %b}")
    source = "you said" if item.source == "user" else "I noticed"
    said = f"{source}, {item.created_at.astimezone(zone):%-d %b}"
    sure = round(item.confidence * 100)
    if item.unsure:
        parts += [said, f"not sure ({sure}%)"]
    else:
        parts.append(said if item.source == "user" else f"{said} ({sure}% sure)")
    if item.last_confirmed_at is not None:
        parts.append(f"confirmed {item.last_confirmed_at.astimezone(zone):%-d %b}")
    return " · ".join(parts)


def render_page(items: list[MemoryItem], zone: ZoneInfo, now: datetime) -> str:
    """Items under their group headings."""
    lines: list[str] = []
    current = -1
    for item in items:
        group = group_of(item)
        if group != current:
            lines.append(f"\n{GROUPS[group][0]}")
            current = group
        lines.append(describe(item, zone, now))
    return "\n".join(lines).strip()


async def memory_page(
    deps: CommandDeps, person: Person, *, page: int = 1, tier: str | None = None
) -> Reply:
    """One page of what is remembered, with forget/pin buttons and navigation."""
    items = await deps.memories.live(person.id, limit=MAX_ITEMS)
    if tier == "pinned":
        items = [m for m in items if m.pinned]
    elif tier is not None:
        items = [m for m in items if m.tier == tier]
    if not items:
        text = EMPTY_MEMORY if tier is None else f"Nothing {tier} in my memory right now."
        return Reply(text, private=True)
    items.sort(key=sort_key)
    pages = (len(items) + deps.page_size - 1) // deps.page_size
    page = min(max(page, 1), pages)
    shown = items[(page - 1) * deps.page_size : page * deps.page_size]
    zone = zone_of(person.timezone)
    header = f"What I remember about you ({len(items)} items, page {page} of {pages}):"
    nav = nav_buttons(page, pages, tier)
    nav.insert(1 if page > 1 else 0, edit_button(shown))
    rows = [*item_buttons(shown), nav]
    buttons = await make_buttons(deps, person, rows)
    body = render_page(shown, zone, deps.clock.now())
    if page == 1 and tier is None and (ongoing := await ongoing_group(deps, person.id, zone)):
        body = f"{body}\n\n{ongoing}"
    return Reply(f"{header}\n{body}", buttons, private=True)


def item_buttons(items: list[MemoryItem]) -> list[list[ButtonSpec]]:
    """Forget and pin/unpin per item, five buttons a row."""
    specs: list[ButtonSpec] = []
    for item in items:
        specs.append(ButtonSpec(f"🗑 {item.label}", "forget", {"m": item.short_id}))
        verb, icon = ("unpin", "📍") if item.pinned else ("pin", "📌")
        specs.append(ButtonSpec(f"{icon} {item.label}", verb, {"m": item.short_id}))
    return [specs[i : i + 5] for i in range(0, len(specs), 5)]


def edit_button(items: list[MemoryItem]) -> ButtonSpec:
    """One ✏️ button for the items shown, which offers an edit button per item. (A third
    button per item would not fit: Discord allows 25 buttons in 5 rows, and a page of
    ten uses 20 for forget and pin, and a row for paging.)"""
    return ButtonSpec("✏️ Edit", "edit_pick", {"ms": [item.short_id for item in items]})


def nav_buttons(
    page: int, pages: int, tier: str | None, verb: str = "memory_page"
) -> list[ButtonSpec]:
    """Previous/next page."""
    nav = []
    if page > 1:
        nav.append(ButtonSpec("◀ Previous", verb, {"page": page - 1, "tier": tier}))
    if page < pages:
        nav.append(ButtonSpec("Next ▶", verb, {"page": page + 1, "tier": tier}))
    return nav


async def trash_view(deps: CommandDeps, person: Person, *, page: int = 1) -> Reply:
    """Forgotten items from the last 30 days, a page at a time, each with a restore
    button."""
    items = await deps.memories.trash(person.id)
    if not items:
        return Reply("The trash is empty. Forgotten memories stay here for 30 days.", private=True)
    pages = (len(items) + deps.page_size - 1) // deps.page_size
    page = min(max(page, 1), pages)
    shown = items[(page - 1) * deps.page_size : page * deps.page_size]
    lines = [f"{m.label} · {m.content} (forgotten)" for m in shown]
    specs = [ButtonSpec(f"♻ Restore {m.label}", "restore", {"m": m.short_id}) for m in shown]
    rows = [specs[i : i + 4] for i in range(0, len(specs), 4)]
    rows.append(nav_buttons(page, pages, None, "trash_page"))
    where = f" — {len(items)} items, page {page} of {pages}" if pages > 1 else ""
    text = f"In the trash (deleted for good 30 days after forgetting){where}:\n" + "\n".join(lines)
    return Reply(text, await make_buttons(deps, person, rows), private=True)


async def search_view(deps: CommandDeps, person: Person, text: str) -> Reply:
    """Memories matching some words (the first `MAX_SEARCH` characters of them)."""
    cut = len(text) > MAX_SEARCH
    text = text[:MAX_SEARCH]
    note = f"\n(I only searched for the first {MAX_SEARCH} characters.)" if cut else ""
    found = await deps.memories.find_by_text(person.id, text, limit=deps.page_size)
    if not found:
        return Reply(
            f"Nothing in my memory matches “{text[:60]}”. /memory shows everything.{note}",
            private=True,
        )
    zone = zone_of(person.timezone)
    body = "\n".join(describe(m, zone, deps.clock.now()) for m in found)
    buttons = await make_buttons(deps, person, [*item_buttons(found), [edit_button(found)]])
    return Reply(f"Matching “{text[:60]}”:\n{body}{note}", buttons, private=True)


async def memory_command(deps: CommandDeps, person: Person, args: str) -> Reply:
    """`/memory [page | core | active | pinned | trash [page] | words]`."""
    word = args.strip().lower()
    if not word:
        return await memory_page(deps, person)
    if is_number(word) and len(word) < 6:
        return await memory_page(deps, person, page=int(word))
    if word in TIER_WORDS:
        return await memory_page(deps, person, tier=TIER_WORDS[word])
    trash, _, trash_page = word.partition(" ")
    if trash == "trash" and (not trash_page or (is_number(trash_page) and len(trash_page) < 6)):
        return await trash_view(deps, person, page=int(trash_page or 1))
    if parse_label(word) is not None and word.startswith("m"):
        item = await deps.memories.get(person.id, parse_label(word) or 0)
        if item is None or not item.live:
            return Reply(f"I have no memory {word}. /memory lists them all.", private=True)
        return Reply(describe(item, zone_of(person.timezone), deps.clock.now()), private=True)
    return await search_view(deps, person, args.strip())


async def memory_with_panel(
    deps: CommandDeps, person: Person, args: str, source: CommandSource
) -> Reply:
    """`/memory …` with, when the panel is on and the chat is private, the way into it:
    a Web App button on Telegram, a one-time link elsewhere."""
    reply = await memory_command(deps, person, args)
    if deps.panel is None:
        return reply
    entry = await deps.panel.entry(person, platform=source.platform, private=source.is_private)
    if entry is None:
        return reply
    if entry.web_app:
        button = Button(BUTTON_LABEL, "", url=entry.url, web_app=True)
        return replace(reply, buttons=((button,), *reply.buttons))
    minutes = int(deps.panel.settings.link_ttl.total_seconds() // 60)
    link = f"{BUTTON_LABEL}: {entry.url}\n(works once, for {minutes} minutes)"
    return replace(reply, text=f"{reply.text}\n\n{link}")
