"""Registers every command and every button verb with the router."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bot.commands import (
    account,
    edit,
    editing,
    importing,
    linking,
    memory_view,
    preferences,
    questions,
    unsure,
)
from bot.commands.base import ACTION_PREFIX, CommandDeps, CommandSource, person_of
from bot.commands.router import STALE_BUTTON, Router
from bot.domain import ButtonPress, IncomingMessage, Reply
from bot.text import clean_text
from memory.store.records import Person

Command = Callable[[CommandDeps, Person, str], Awaitable[Reply]]
Verb = Callable[[CommandDeps, Person, dict[str, Any]], Awaitable[Reply]]
SourcedCommand = Callable[[CommandDeps, Person, str, CommandSource], Awaitable[Reply]]
"""A command that makes or changes a memory and keeps its own text as the source."""


async def _forget_or_all(deps: CommandDeps, person: Person, args: str) -> Reply:
    if args.strip().lower() == "all":
        return await account.confirm_erase(deps, person)
    return await editing.target_command(deps, person, args, "forget")


COMMANDS: dict[str, Command] = {
    "help": lambda d, p, a: _static(account.HELP),
    "forget": _forget_or_all,
    "pin": lambda d, p, a: editing.target_command(d, p, a, "pin"),
    "unpin": lambda d, p, a: editing.target_command(d, p, a, "unpin"),
    "cancel": edit.cancel_command,
    "export": lambda d, p, a: account.export(d, p),
    "diary": account.diary,
    "settings": lambda d, p, a: preferences.settings_view(d, p),
    "timezone": preferences.timezone_command,
    "checkin": preferences.checkin_command,
    "quiet": preferences.quiet_command,
    "pause": lambda d, p, a: preferences.pause_command(d, p, True),
    "resume": lambda d, p, a: preferences.pause_command(d, p, False),
    "import": importing.import_command,
}


SOURCED: dict[str, SourcedCommand] = {
    "memory": memory_view.memory_with_panel,
    "remember": editing.remember,
    "edit": edit.edit_command,
}


async def _static(text: str) -> Reply:
    return Reply(text)


async def _on_item(deps: CommandDeps, person: Person, payload: dict[str, Any], verb: str) -> Reply:
    item = await deps.memories.get(person.id, int(payload.get("m", 0)))
    if item is None or not item.live:
        return editing.not_found(f"m{payload.get('m', '?')}")
    action = {"forget": editing.forget, "pin": editing.pin, "unpin": editing.unpin}[verb]
    return await action(deps, person, item)


VERBS: dict[str, Verb] = {
    "memory_page": lambda d, p, x: memory_view.memory_page(
        d, p, page=int(x.get("page", 1)), tier=x.get("tier")
    ),
    "trash_page": lambda d, p, x: memory_view.trash_view(d, p, page=int(x.get("page", 1))),
    "forget": lambda d, p, x: _on_item(d, p, x, "forget"),
    "pin": lambda d, p, x: _on_item(d, p, x, "pin"),
    "unpin": lambda d, p, x: _on_item(d, p, x, "unpin"),
    "restore": lambda d, p, x: editing.restore(d, p, int(x["m"])),
    "edit": lambda d, p, x: edit.ask_for_text(d, p, int(x.get("m", 0))),
    "edit_pick": lambda d, p, x: edit.pick(d, p, [int(m) for m in x.get("ms", [])]),
    "undo": lambda d, p, x: editing.undo(d, p, int(x["event"]), int(x["m"])),
    "erase": lambda d, p, x: account.erase(d, p),
    "cancel": lambda d, p, x: _static("Cancelled — nothing was erased."),
    "checkin_menu": lambda d, p, x: preferences.choice_menu(d, p, "checkin"),
    "quiet_menu": lambda d, p, x: preferences.choice_menu(d, p, "quiet"),
    "timezone_menu": lambda d, p, x: preferences.choice_menu(d, p, "timezone"),
    "checkin": lambda d, p, x: preferences.checkin_command(d, p, str(x.get("value", ""))),
    "quiet": lambda d, p, x: preferences.quiet_command(d, p, str(x.get("value", ""))),
    "timezone": lambda d, p, x: preferences.timezone_command(d, p, str(x.get("value", ""))),
    "set": preferences.set_flags,
    "update_yes": lambda d, p, x: questions.answer(d, p, x, True),
    "update_no": lambda d, p, x: questions.answer(d, p, x, False),
    "affirm": unsure.affirm_verb,
    "import_self": importing.chose_self,
    "import_undo": importing.undo_verb,
    "outreach": linking.outreach_choice,
    "link_settings": linking.take_settings,
    "unlink": linking.unlink,
    "keep": lambda d, p, x: _static("Cancelled — nothing was unlinked."),
}
PressVerb = Callable[[CommandDeps, Person, dict[str, Any], ButtonPress], Awaitable[Reply]]
PRESS_VERBS: dict[str, PressVerb] = {"import_start": importing.start}
"""Verbs that need the press itself (the message under which the button was)."""

ACCOUNT_COMMANDS: dict[str, Callable[[CommandDeps, IncomingMessage, str], Awaitable[Reply]]] = {
    "link": linking.link_command,
    "unlink": lambda d, incoming, a: linking.unlink_command(d, incoming),
}
"""Commands about the account itself (its platform), not only the person behind it."""


def install_commands(router: Router, deps: CommandDeps) -> None:
    """Make the router answer every command and button of the core."""
    for name, command in COMMANDS.items():
        router.register(name, _command_handler(deps, name, _unsourced(command)))
    for name, sourced in SOURCED.items():
        router.register(name, _command_handler(deps, name, sourced))
    router.register("start", _start_handler(deps))
    for name, account_command in ACCOUNT_COMMANDS.items():
        router.register(name, _account_handler(deps, account_command))
    router.register_press(ACTION_PREFIX, _press_handler(deps))
    router.register_files(lambda incoming: importing.receive_file(deps, incoming))


def _unsourced(command: Command) -> SourcedCommand:
    async def run(deps: CommandDeps, person: Person, args: str, source: CommandSource) -> Reply:
        return await command(deps, person, args)

    return run


def _command_handler(
    deps: CommandDeps, name: str, command: SourcedCommand
) -> Callable[[IncomingMessage, str], Awaitable[Reply]]:
    async def handle(incoming: IncomingMessage, args: str) -> Reply:
        person = await person_of(deps, incoming)
        if name != "cancel":  # any other command ends a wait for an edit's new text
            await edit.stop_waiting(deps, person)
        source = CommandSource(
            incoming.platform, incoming.chat_id, clean_text(incoming.text), incoming.is_private
        )
        return await command(deps, person, args, source)

    return handle


def _start_handler(deps: CommandDeps) -> Callable[[IncomingMessage, str], Awaitable[Reply]]:
    async def start(incoming: IncomingMessage, args: str) -> Reply:
        person = await person_of(deps, incoming)
        await edit.stop_waiting(deps, person)
        return await account.start(deps, person, incoming)

    return start


def _account_handler(
    deps: CommandDeps,
    command: Callable[[CommandDeps, IncomingMessage, str], Awaitable[Reply]],
) -> Callable[[IncomingMessage, str], Awaitable[Reply]]:
    async def handle(incoming: IncomingMessage, args: str) -> Reply:
        if incoming.is_private:  # a group gets no person made for it here
            await edit.stop_waiting(deps, await person_of(deps, incoming))
        return await command(deps, incoming, args)

    return handle


def _press_handler(deps: CommandDeps) -> Callable[[ButtonPress, str], Awaitable[Reply]]:
    async def press(button: ButtonPress, token: str) -> Reply:
        # Resolved by account first: a press from someone unknown (or erased) is stale
        # and must not create a person.
        action = await deps.actions.resolve_account(
            button.platform, button.platform_user_id, token, now=deps.clock.now()
        )
        if action is not None and action.verb in PRESS_VERBS:
            person = await person_of(deps, button)
            return await PRESS_VERBS[action.verb](deps, person, action.payload, button)
        verb = VERBS.get(action.verb) if action is not None else None
        if action is None or verb is None:
            return Reply(STALE_BUTTON)
        return await verb(deps, await person_of(deps, button), action.payload)

    return press
