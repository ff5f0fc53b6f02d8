"""`companion import PERSON FILE`: import a chat export from the command line, with a
progress bar while it is stored and while it is learned from.

PERSON is `telegram:<user id>`, `discord:<user id>` (created when new) or the number of
an existing person. Without `--as`, the person's own messages are found by their
platform id in the export (a ChatGPT or text file is theirs whole); when they are not,
the participants are listed and nothing is kept. `--background` leaves the learning to
the running companion's scheduler.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from bot.bootstrap import Core, build_core, import_config
from bot.chat_exports import ExportRejected
from bot.commands.importing import self_ids
from bot.config import Settings
from bot.domain import IncomingMessage
from bot.errors import InvalidInput
from bot.imports import estimate, found_lines, read_export, run_batch, undo
from memory.store.imports import ImportView, choose_self, start_import
from memory.store.records import Person


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `import` subcommand."""
    command = commands.add_parser("import", help="import a chat export into a person's memory")
    command.add_argument("person", help="telegram:<id>, discord:<id>, or a person's number")
    command.add_argument("file", type=Path, help="result.json, conversations.json, .json, .txt")
    command.add_argument("--as", dest="self_name", help="which participant is the person")
    command.add_argument(
        "--background",
        action="store_true",
        help="only store it; the running companion learns from it a little at a time",
    )


async def run_import(
    settings: Settings, args: argparse.Namespace, bar: Callable[[int, int], None]
) -> int:
    """`import_file` on a core built from the settings; the exit status."""
    core = await build_core(settings)
    try:
        return await import_file(core, args, bar)
    finally:
        await core.aclose()


async def import_file(core: Core, args: argparse.Namespace, bar: Callable[[int, int], None]) -> int:
    """Store the export, settle who the person is, then learn from it (unless
    `--background`); the exit status."""
    person, ids = await _person(core, args.person)
    try:
        view = await read_export(
            args.file,
            person=person,
            self_ids=ids,
            sessions=core.sessions,
            clock=core.clock,
            config=import_config(core.settings),
            progress=_stored,
        )
    except ExportRejected as exc:
        print(f"\n{exc}", file=sys.stderr)
        return 1
    print()
    for line in found_lines(view, estimate(view, import_config(core.settings)), person.timezone):
        print(line)
    if not await _settle_self(core, person, view, args.self_name):
        return 1
    await start_import(core.sessions, user_id=person.id, import_id=view.id, now=core.clock.now())
    if args.background:
        print(f"import {view.id} stored; the running companion will learn from it")
        return 0
    await _learn(core, person, view, bar)
    print(f"\nimport {view.id} done; undo with /import undo in a chat")
    return 0


def _stored(count: int) -> None:
    print(f"\rstored {count:,} messages", end="")
    sys.stdout.flush()


async def _person(core: Core, given: str) -> tuple[Person, set[str]]:
    platform, _, platform_user_id = given.partition(":")
    if platform_user_id:
        incoming = IncomingMessage(platform, platform_user_id, "")
        person = await core.store.ensure_person(
            platform=platform,
            platform_user_id=platform_user_id,
            chat_id=None,
            display_name=None,
            private_chat=False,
        )
        return person, self_ids(incoming)
    found = await core.store.person(int(given)) if given.isdecimal() else None
    if found is None:
        raise InvalidInput(f"no person {given!r}: give telegram:<id>, discord:<id> or a number")
    return found, set()


async def _settle_self(core: Core, person: Person, view: ImportView, name: str | None) -> bool:
    if name is None and view.self_name is not None:
        return True
    chosen = name is not None and await choose_self(
        core.sessions, user_id=person.id, import_id=view.id, name=name
    )
    if chosen:
        return True
    await undo(core.sessions, user_id=person.id, import_id=view.id)
    names = ", ".join(repr(p.name) for p in view.participants)
    print(
        f"which participant is the person? Run again with --as NAME (one of {names}); "
        "nothing was kept",
        file=sys.stderr,
    )
    return False


async def _learn(
    core: Core, person: Person, view: ImportView, bar: Callable[[int, int], None]
) -> None:
    assert core.importer is not None
    deps = core.importer.extracting
    current: ImportView | None = view
    while current is not None and current.status != "done":
        current = await run_batch(deps, current, timezone=person.timezone)
        if current is not None:
            bar(current.extracted_count, current.message_count)
