"""Routes what a person sends: a command to its handler, anything else to the
conversation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot import metrics
from bot.conversation import Conversation, handle_message, record_message
from bot.domain import ButtonPress, IncomingMessage, Reply
from bot.text import clean_text

Handler = Callable[[IncomingMessage, str], Awaitable[Reply]]
PressHandler = Callable[[ButtonPress, str], Awaitable[Reply]]
FileHandler = Callable[[IncomingMessage], Awaitable[Reply]]
STALE_BUTTON = "That button has expired or isn't valid any more. Send /help to start again."


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """A command name (lower case, without '/' or '@botname') and its argument text."""

    name: str
    args: str


def parse_command(text: str) -> ParsedCommand | None:
    """`/Forget@mybot m12` → ParsedCommand('forget', 'm12'); plain text → None."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, _, rest = text[1:].partition(" ")
    name = head.split("@", 1)[0].lower()
    if not name or not name.replace("_", "").isalnum():
        return None
    return ParsedCommand(name=name, args=rest.strip())


class Router:
    """Dispatches commands by name; plain text goes to `handle_message`."""

    def __init__(self, conversation: Conversation) -> None:
        self._conversation = conversation
        self._handlers: dict[str, Handler] = {}
        self._press_handlers: dict[str, PressHandler] = {}
        self._files: FileHandler | None = None

    def register(self, name: str, handler: Handler) -> None:
        """Add or replace the handler of `/name`."""
        self._handlers[name] = handler

    def register_files(self, handler: FileHandler) -> None:
        """Handle messages that carry a file (chat exports to import)."""
        self._files = handler

    def register_press(self, prefix: str, handler: PressHandler) -> None:
        """Handle button actions `prefix:rest`; the handler gets `rest`."""
        self._press_handlers[prefix] = handler

    @property
    def command_names(self) -> tuple[str, ...]:
        """Every command this router knows."""
        return tuple(self._handlers)

    async def handle(self, incoming: IncomingMessage) -> Reply:
        """The reply to one incoming message or command."""
        if incoming.attachment is not None and self._files is not None:
            with metrics.observe_turn(incoming.platform, "command"):
                return await self._files(incoming)
        command = parse_command(clean_text(incoming.text))
        kind = "message" if command is None else "command"
        # A plain message is counted once, when it is first stored (a burst's earlier
        # messages through `record`, its last one here).
        with metrics.observe_turn(incoming.platform, kind, count=command is not None):
            if command is None:
                return await handle_message(incoming, conversation=self._conversation)
            handler = self._handlers.get(command.name)
            if handler is None:
                return Reply(
                    f"I don't know the command /{command.name[:32]}. "
                    "Try /help to see what I can do."
                )
            return await handler(incoming, command.args)

    async def record(self, incoming: IncomingMessage) -> None:
        """Store a plain message now; a later `handle` of the burst's last one answers all."""
        await record_message(incoming, conversation=self._conversation)

    async def press(self, press: ButtonPress) -> Reply:
        """The reply to a button press; stale or forged actions get a clear message."""
        prefix, _, rest = press.action.partition(":")
        handler = self._press_handlers.get(prefix)
        with metrics.observe_turn(press.platform, "button"):
            if handler is None or len(press.action) > 64:
                return Reply(STALE_BUTTON)
            return await handler(press, rest)
