"""Driving the core's commands and buttons the way an adapter does, for the tests."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from bot.bootstrap import Core
from bot.domain import Attachment, Button, ButtonPress, IncomingMessage, Reply


def says(text: str, user: str = "alice") -> IncomingMessage:
    """A private console message from `user`."""
    return IncomingMessage("console", user, text, chat_id=f"chat-{user}", display_name=user)


async def run(core: Core, text: str, user: str = "alice") -> Reply:
    """The reply to `text` from `user`."""
    return await core.router.handle(says(text, user))


def button(reply: Reply, label: str) -> Button:
    """The first button whose label starts with `label`."""
    found = [b for row in reply.buttons for b in row if b.label.startswith(label)]
    assert found, f"no button {label!r} in {labels(reply)}"
    return found[0]


async def press(core: Core, reply: Reply, label: str, user: str = "alice") -> Reply:
    """`user` presses the button `label` under `reply`."""
    return await press_action(core, button(reply, label).action, user)


async def press_action(core: Core, action: str, user: str = "alice") -> Reply:
    """`user` presses a button carrying `action`."""
    return await core.router.press(ButtonPress("console", user, action, chat_id=f"chat-{user}"))


def labels(reply: Reply) -> list[str]:
    """Every button label, row by row."""
    return [b.label for row in reply.buttons for b in row]


async def remember(core: Core, *facts: str, user: str = "alice") -> list[Reply]:
    """`/remember` each fact, checking each was saved."""
    replies = []
    for fact in facts:
        reply = await run(core, f"/remember {fact}", user)
        assert reply.text.startswith("Got it"), reply.text
        replies.append(reply)
    return replies


async def send_file(core: Core, filename: str, content: bytes, user: str = "alice") -> Reply:
    """The reply to `user` sending a file (a chat export) in their private chat."""

    async def fetch(path: Path) -> None:
        await asyncio.to_thread(path.write_bytes, content)

    incoming = replace(says("", user), attachment=Attachment(filename, len(content), fetch))
    return await core.router.handle(incoming)
