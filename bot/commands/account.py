"""The person's whole account: `/export`, `/forget all`, `/diary`, `/start` and `/help`."""

from __future__ import annotations

import json
from datetime import timedelta

from bot.commands.base import ButtonSpec, CommandDeps, is_number, make_buttons
from bot.domain import Document, IncomingMessage, Reply
from bot.timezone_onboarding import QUESTION, TimezoneOnboarding
from memory.care.erasure import count_person_data, erase_person
from memory.care.export import export_person
from memory.store.diary import DiaryRecord, recent_entries
from memory.store.records import Person

HELP = """I'm your companion: talk to me about anything, and I'll remember what matters to you.

What I remember
/memory — see it (by page, core, active, pinned, trash, or words)
/forget m12, /forget words, /forget all — let something go, or everything
/pin m12, /unpin m12 — always keep something in mind
/remember … — tell me something to keep
/edit m12 … — correct a memory (or ✏️ Edit under /memory)
/export — download everything I keep about you
/import — bring in an old chat: send me its export as a file (/import undo removes it)

Messages I start
/settings — timezone, daily check-in, quiet hours, notices
/timezone Copenhagen, /checkin 09:00 or off, /quiet 22:00-08:00 or off
/pause, /resume

One person everywhere
/link — a code to link your account on another platform (Telegram, Discord)
/link CODE — on the other platform, in a private chat: join the two
/unlink — take this account out again

/diary — my recent diary entries about our conversations"""

START = (
    "Hi, I'm Companion — someone to talk to who remembers what matters to you.\n\n"
    "As we talk I'll keep short notes: people in your life, plans, how things are going. "
    "I use them to follow up — like asking how the interview went. You can see every note "
    "with /memory, and erase any of them (or everything) with /forget.\n\n"
    "Now and then I'll check in on my own; /settings changes when, or /pause stops it."
)
ERASE_LABELS = {
    "memories": "memories (with their history)",
    "memory_events": "memory changes",
    "messages": "messages",
    "sessions": "conversations",
    "threads": "threads",
    "diary_entries": "diary entries",
    "outreach": "check-ins I sent",
    "held_notices": "notes waiting for your quiet hours to end",
    "imports": "imported chats",
}


async def start(deps: CommandDeps, person: Person, incoming: IncomingMessage) -> Reply:
    """`/start`: who the companion is and, until it is known in a private chat, the
    timezone question with buttons for likely zones."""
    if person.timezone_known:
        return Reply(f"{START}\n\nYour timezone is {person.timezone} (/timezone changes it).")
    if not incoming.is_private:
        return Reply(f"{START}\n\nWrite to me privately to set your timezone.")
    question = f"First: {QUESTION[0].lower()}{QUESTION[1:]} (/timezone changes it any time.)"
    text, buttons = await TimezoneOnboarding(deps).question(person, incoming, text=question)
    return Reply(f"{START}\n\n{text}", buttons)


async def export(deps: CommandDeps, person: Person) -> Reply:
    """All the person's data as a JSON document."""
    data = await export_person(deps.sessions, user_id=person.id)
    data["exported_at"] = deps.clock.now().isoformat()
    content = json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8")
    filename = f"companion-export-{deps.clock.now():%Y-%m-%d}.json"
    return Reply(
        "Here is everything I keep about you: settings, memories with their history, "
        "threads, diary and messages.",
        document=Document(filename, content),
        private=True,
    )


async def confirm_erase(deps: CommandDeps, person: Person) -> Reply:
    """State what `/forget all` will erase, with counts, and ask for confirmation."""
    counts = await count_person_data(deps.sessions, user_id=person.id)
    parts = [f"{counts[t]} {label}" for t, label in ERASE_LABELS.items() if counts.get(t)]
    listing = ", ".join(parts) if parts else "your settings"
    buttons = await make_buttons(
        deps,
        person,
        [[ButtonSpec("Yes, erase everything", "erase", {}), ButtonSpec("Cancel", "cancel", {})]],
        ttl=timedelta(minutes=10),
        single_use=True,
    )
    return Reply(
        f"This erases everything I keep about you: {listing}, and your settings. It cannot "
        "be undone. Erase it all?",
        buttons,
        private=True,
    )


async def erase(deps: CommandDeps, person: Person) -> Reply:
    """Erase the person from every table."""
    await erase_person(deps.sessions, user_id=person.id)
    return Reply(
        "Done. I've erased everything about you — memories, messages, conversations and "
        "settings. If you write again, we start fresh.",
        private=True,
    )


async def diary(deps: CommandDeps, person: Person, args: str) -> Reply:
    """The companion's recent diary entries about the person."""
    if args.strip() and not is_number(args.strip()):
        return Reply("Use /diary or /diary 5 (how many entries).", private=True)
    count = min(max(int(args.strip() or 3), 1), 10)
    entries = await recent_entries(deps.sessions, user_id=person.id, limit=count)
    if not entries:
        return Reply(
            "No diary yet. Each night after we've talked I'll write a few lines about our "
            "day here.",
            private=True,
        )
    return Reply("\n\n".join(_render_entry(entry) for entry in entries), private=True)


def _render_entry(entry: DiaryRecord) -> str:
    """One entry: the date, the lines, and the notes to self."""
    heading = f"📔 {entry.local_date:%A %-d %B %Y}"
    if entry.withdrawn:
        return f"{heading}\n(removed: it mentioned something you asked me to forget)"
    lines = "\n".join(entry.lines)
    notes = "\n".join(f"• {note}" for note in entry.notes_to_self)
    return f"{heading}\n{lines}\nNotes to self:\n{notes}" if notes else f"{heading}\n{lines}"
