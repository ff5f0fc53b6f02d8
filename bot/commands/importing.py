"""Importing chat history from a private chat: a file sent as a document or attachment
is read and described (messages, dates, participants, what learning from it costs) with
a Start button (or, for someone else's export, a button per participant to say which
one is the person); Start lets the background extraction begin, and the message shows
its progress. `/import` shows the latest import; `/import undo` removes it whole.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import structlog

from bot.chat_exports import ExportRejected
from bot.commands.base import ButtonSpec, CommandDeps, make_buttons, person_of
from bot.domain import ButtonPress, IncomingMessage, Reply
from bot.imports import estimate, found_lines, percent, read_export, undo
from memory.store.imports import ImportView, choose_self, get_import, latest_import, start_import
from memory.store.records import Person

log = structlog.get_logger(__name__)

MAX_CHOICES = 8
GROUP_REFUSAL = (
    "I only import chat history in our private chat — a group is no place for someone's "
    "old messages. Please send me the file there."
)
HOW_TO = (
    "To bring in an old chat, send me its export as a file here: Telegram Desktop's "
    "result.json (Export chat history, JSON), ChatGPT's conversations.json, a "
    "DiscordChatExporter JSON file, or a text file with one message per line. I'll tell "
    "you what I found before I learn anything from it."
)
CONTEXT_NOTE = "Only your own words become memories about you; everyone else's are kept as context."
NOTHING_TO_UNDO = "There is no import to undo."
GONE = "That import is gone already (undone, cancelled, or left unstarted for over a week)."
_DOWNLOAD_FAILED = (
    "I couldn't download that file. Please try sending it again; a file over 20 MB has to "
    "be imported from the command line (`companion import`) by whoever runs me."
)


def self_ids(source: IncomingMessage | ButtonPress) -> set[str]:
    """How exports name the sender: Telegram's `user<id>`, Discord's bare id."""
    return {source.platform_user_id, f"user{source.platform_user_id}"}


async def receive_file(deps: CommandDeps, incoming: IncomingMessage) -> Reply:
    """A file sent in a chat: imported in a private chat, politely refused in a group."""
    attachment = incoming.attachment
    if attachment is None:
        return Reply(HOW_TO)
    if not incoming.is_private:
        return Reply(GROUP_REFUSAL)
    person = await person_of(deps, incoming)
    limit = deps.imports.max_bytes
    if attachment.size is not None and attachment.size > limit:
        return Reply(str(ExportRejected("too_large", limit=f"{limit / 1_000_000:.0f} MB")))
    with tempfile.TemporaryDirectory(prefix="companion-import-") as folder:
        path = Path(folder) / "export"
        try:
            await attachment.fetch(path)
        except Exception as exc:
            log.warning("import.download_failed", error=type(exc).__name__)
            return Reply(_DOWNLOAD_FAILED)
        try:
            view = await read_export(
                path,
                person=person,
                self_ids=self_ids(incoming),
                sessions=deps.sessions,
                clock=deps.clock,
                config=deps.imports,
            )
        except ExportRejected as exc:
            log.info("import.rejected", user_id=person.id, reason=exc.reason)
            return Reply(str(exc))
    return await preview(deps, person, view)


async def preview(deps: CommandDeps, person: Person, view: ImportView) -> Reply:
    """What the export holds and the next step: Start, or who of them the person is."""
    lines = found_lines(view, estimate(view, deps.imports), person.timezone)
    cancel = ButtonSpec("Cancel", "import_undo", {"i": view.id})
    if view.self_name is None:
        choices = [
            [ButtonSpec(p.name[:60], "import_self", {"i": view.id, "n": p.name})]
            for p in view.participants[:MAX_CHOICES]
        ]
        text = "\n".join([*lines, "", "Which of these is you?"])
        return Reply(text, await make_buttons(deps, person, [*choices, [cancel]]), private=True)
    start = ButtonSpec("Start", "import_start", {"i": view.id})
    text = "\n".join([*lines, f"You are {view.self_name}. {CONTEXT_NOTE}"])
    return Reply(text, await make_buttons(deps, person, [[start, cancel]]), private=True)


async def chose_self(deps: CommandDeps, person: Person, payload: dict[str, Any]) -> Reply:
    """The person said which participant they are: show the Start step."""
    import_id, name = int(payload.get("i", 0)), str(payload.get("n", ""))
    if not await choose_self(deps.sessions, user_id=person.id, import_id=import_id, name=name):
        return Reply(GONE)
    view = await get_import(deps.sessions, user_id=person.id, import_id=import_id)
    return await preview(deps, person, view) if view is not None else Reply(GONE)


async def start(
    deps: CommandDeps, person: Person, payload: dict[str, Any], press: ButtonPress
) -> Reply:
    """Start learning from the import; the pressed message becomes its progress."""
    import_id = int(payload.get("i", 0))
    where = (
        (press.platform, press.chat_id, press.message_id)
        if press.chat_id is not None and press.message_id is not None
        else None
    )
    started = await start_import(
        deps.sessions, user_id=person.id, import_id=import_id, now=deps.clock.now(), progress=where
    )
    view = await get_import(deps.sessions, user_id=person.id, import_id=import_id)
    if view is None or (not started and view.status == "pending"):
        return Reply(GONE)
    log.info("import.started", user_id=person.id, import_id=import_id)
    return await progress_reply(deps, person, view)


async def progress_reply(deps: CommandDeps, person: Person, view: ImportView) -> Reply:
    """How far learning from an import got, with its Undo button."""
    undo_button = ButtonSpec("Undo import", "import_undo", {"i": view.id})
    buttons = await make_buttons(deps, person, [[undo_button]])
    return Reply(progress_text(view), buttons, private=True)


def progress_text(view: ImportView) -> str:
    """The progress line of an import."""
    if view.status == "done":
        return (
            f"Finished learning from the {view.message_count:,} imported messages. "
            "/import undo removes them and everything learned from them."
        )
    return (
        f"Learning from your import: {percent(view)}% ({view.extracted_count:,} of "
        f"{view.message_count:,} messages read), a little at a time. /import undo removes it "
        "and everything learned from it."
    )


async def undo_verb(deps: CommandDeps, person: Person, payload: dict[str, Any]) -> Reply:
    """Cancel or undo one import (button)."""
    return await _undo(deps, person, int(payload.get("i", 0)))


async def import_command(deps: CommandDeps, person: Person, args: str) -> Reply:
    """`/import`: the latest import's state (or how to import); `/import undo` removes it."""
    latest = await latest_import(deps.sessions, user_id=person.id)
    if args.strip().lower() == "undo":
        return await _undo(deps, person, latest.id) if latest else Reply(NOTHING_TO_UNDO)
    if latest is None:
        return Reply(HOW_TO)
    if latest.status == "pending":
        return await preview(deps, person, latest)
    return await progress_reply(deps, person, latest)


async def _undo(deps: CommandDeps, person: Person, import_id: int) -> Reply:
    done = await undo(deps.sessions, user_id=person.id, import_id=import_id)
    if done is None:
        return Reply(GONE)
    return Reply(
        f"Removed the import: {done.messages:,} messages and the {done.memories:,} "
        "memories learned from them.",
        private=True,
    )
