"""`companion chat`: talk to the companion in the terminal, through the same core and
database as every other platform. Buttons are shown as numbered choices (type the
number to press one); files are saved next to you; notices are printed when they come.

The numbers always mean the choices shown last: an answer to what you typed replaces
them (an answer without buttons clears them, so a number is then just text); a message
the companion sends on its own replaces them only when it brings choices of its own."""

from __future__ import annotations

import asyncio
import getpass
import os
from pathlib import Path
from typing import TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.bootstrap import Core
from bot.domain import Button, ButtonPress, IncomingMessage, Recipient, Reply

PLATFORM = "console"
BANNER = (
    "Companion — type a message and press Enter. /help lists the commands; type a "
    "number to press a button; Ctrl-D (or /quit) leaves."
)


def render(reply: Reply, start: int = 1) -> tuple[str, list[Button]]:
    """The text to print for a reply, and its buttons in the order they are numbered."""
    buttons = [button for row in reply.buttons for button in row]
    lines = [reply.text] if reply.text else []
    lines += [f"  [{number}] {button.label}" for number, button in enumerate(buttons, start)]
    return "\n".join(lines), buttons


def machine_zone(localtime: Path = Path("/etc/localtime")) -> str | None:
    """The IANA zone this machine keeps time by (`TZ`, else where /etc/localtime points),
    offered first when the companion asks for the timezone; None when unknown."""
    named = os.environ.get("TZ", "").lstrip(":")
    if not named and localtime.is_symlink():
        target = str(localtime.resolve())
        named = target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else ""
    try:
        ZoneInfo(named)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None
    return named if "/" in named and not named.startswith("Etc/") else None


class ConsoleChat:
    """One terminal conversation for the local user; also its delivery port."""

    platform = PLATFORM

    def __init__(
        self,
        core: Core,
        *,
        stdin: TextIO,
        stdout: TextIO,
        user: str | None = None,
        downloads: Path | None = None,
        local_zone: str | None = None,
    ) -> None:
        self._core = core
        self._stdin = stdin
        self._stdout = stdout
        self._user = user or getpass.getuser()
        self._downloads = downloads or Path.cwd()
        self._zone = local_zone or machine_zone()
        self._buttons: list[Button] = []
        self._lock = asyncio.Lock()

    async def send(self, recipient: Recipient, reply: Reply) -> str:
        """Print a message the companion sends on its own (notices, check-ins)."""
        await self._show(reply, answer=False)
        return "console"

    async def run(self) -> None:
        """Read lines until end of input, answering each."""
        self._core.outbound.register(self)
        self._write(BANNER)
        try:
            while True:
                line = await asyncio.to_thread(self._stdin.readline)
                if not line or line.strip() in {"/quit", "/exit"}:
                    return
                await self._answer(line.rstrip("\n"))
        finally:
            self._core.outbound.unregister(PLATFORM)

    async def _answer(self, line: str) -> None:
        choice = line.strip()
        if choice.isascii() and choice.isdecimal() and 1 <= int(choice) <= len(self._buttons):
            action = self._buttons[int(choice) - 1].action
            reply = await self._core.router.press(
                ButtonPress(PLATFORM, self._user, action, chat_id=PLATFORM)
            )
        else:
            reply = await self._core.router.handle(
                IncomingMessage(
                    platform=PLATFORM,
                    platform_user_id=self._user,
                    chat_id=PLATFORM,
                    display_name=self._user,
                    text=line,
                    local_zone=self._zone,
                )
            )
        if reply.silent:
            self._buttons = []
        else:
            await self._show(reply, answer=True)

    async def _show(self, reply: Reply, *, answer: bool) -> None:
        async with self._lock:
            text, buttons = render(reply)
            if answer or buttons:
                self._buttons = buttons
            if reply.document is not None:
                path = self._downloads / reply.document.filename
                await asyncio.to_thread(path.write_bytes, reply.document.content)
                text += f"\n  (saved {path})"
            self._write(f"companion> {text}")

    def _write(self, text: str) -> None:
        self._stdout.write(text + "\n")
        self._stdout.flush()
