"""`companion chat`: talk to the companion in the terminal, through the same core and
database as every other platform. Buttons are shown as numbered choices."""

from __future__ import annotations

import asyncio
import getpass
from typing import TextIO

from bot.bootstrap import Core
from bot.domain import Button, IncomingMessage, Reply

PLATFORM = "console"
BANNER = (
    "Companion — type a message and press Enter. /help lists the commands; "
    "Ctrl-D (or /quit) leaves."
)


def render(reply: Reply) -> tuple[str, list[Button]]:
    """The text to print for a reply, and its buttons in the order they are numbered."""
    buttons = [button for row in reply.buttons for button in row]
    lines = [reply.text]
    lines += [f"  [{number}] {button.label}" for number, button in enumerate(buttons, 1)]
    if reply.document is not None:
        lines.append(f"  (file: {reply.document.filename}, {len(reply.document.content):,} bytes)")
    return "\n".join(lines), buttons


class ConsoleChat:
    """One terminal conversation for the local user."""

    def __init__(self, core: Core, *, stdin: TextIO, stdout: TextIO, user: str | None = None):
        self._core = core
        self._stdin = stdin
        self._stdout = stdout
        self._user = user or getpass.getuser()
        self._buttons: list[Button] = []
        self._write_lock = asyncio.Lock()

    async def say(self, text: str) -> None:
        """Print a line from the companion (replies and, later, proactive messages)."""
        async with self._write_lock:
            self._stdout.write(f"companion> {text}\n")
            self._stdout.flush()

    async def run(self) -> None:
        """Read lines until end of input, answering each."""
        self._stdout.write(BANNER + "\n")
        self._stdout.flush()
        while True:
            line = await asyncio.to_thread(self._stdin.readline)
            if not line or line.strip() in {"/quit", "/exit"}:
                return
            await self._answer(line.rstrip("\n"))

    async def _answer(self, line: str) -> None:
        incoming = IncomingMessage(
            platform=PLATFORM,
            platform_user_id=self._user,
            chat_id=PLATFORM,
            display_name=self._user,
            text=line,
        )
        reply = await self._core.router.handle(incoming)
        if reply.silent:
            return
        text, self._buttons = render(reply)
        await self.say(text)
