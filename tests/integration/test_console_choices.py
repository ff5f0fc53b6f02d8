"""The terminal chat's numbered choices, in process over the real core: a number means
a choice shown last; an answer without buttons clears them; a message the companion
sends on its own replaces them only when it brings choices of its own."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from pathlib import Path

from adapters.console.chat import ConsoleChat
from bot.bootstrap import Core
from bot.domain import Button, Recipient, Reply

Step = str | Callable[[ConsoleChat], Awaitable[object]]


class ScriptedStdin(io.StringIO):
    """Lines to type; a callable step runs on the event loop between two lines (the
    companion sending something on its own while the person is typing)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, steps: list[Step]) -> None:
        super().__init__()
        self.console: ConsoleChat | None = None
        self._loop = loop
        self._steps = list(steps)

    def readline(self, size: int | None = -1) -> str:
        while self._steps:
            step = self._steps.pop(0)
            if isinstance(step, str):
                return step + "\n"
            assert self.console is not None
            asyncio.run_coroutine_threadsafe(step(self.console), self._loop).result(timeout=10)
        return ""


async def chat(core: Core, tmp_path: Path, steps: list[Step]) -> str:
    """Run a terminal chat as Alice over `steps`; everything it printed."""
    out = io.StringIO()
    stdin = ScriptedStdin(asyncio.get_running_loop(), steps)
    stdin.console = ConsoleChat(core, stdin=stdin, stdout=out, user="alice", downloads=tmp_path)
    await stdin.console.run()
    return out.getvalue()


def sends(reply: Reply) -> Callable[[ConsoleChat], Awaitable[str]]:
    """A step: the companion sends `reply` on its own."""
    return lambda console: console.send(Recipient(1, "console", "alice", "console"), reply)


async def test_an_answer_without_buttons_clears_the_numbers(core: Core, tmp_path: Path) -> None:
    out = await chat(core, tmp_path, ["/remember I keep bees", "/help", "1"])
    assert "[1] ↩ Undo" in out and "let go" not in out
    assert "companion> Tell me more." in out  # the "1" went to the conversation


async def test_a_message_of_its_own_keeps_or_replaces_the_numbers(
    core: Core, tmp_path: Path
) -> None:
    out = await chat(
        core,
        tmp_path,
        [
            "/remember I keep bees",
            sends(Reply("Morning! How are the bees?")),  # no choices: the Undo stays
            "1",
            "/remember I collect stamps",
            sends(Reply("Pick one", ((Button("Stale", "a:unknown-token"),),))),
            "1",
        ],
    )
    assert "companion> Morning! How are the bees?" in out
    assert "Undone — I've let go of “I keep bees” (m1)." in out
    assert "[1] Stale" in out and "expired or isn't valid" in out  # replaced the Undo
    assert "let go of “I collect stamps”" not in out
