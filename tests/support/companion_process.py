"""`companion` as a child process, the one way the process tests start it: an environment
pointing it at the loopback fakes and the test database (nothing inherited from the
machine's own companion settings), and starting and stopping the process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.telegram_api import TOKEN, FakeTelegramAPI

KEY = "sk-ant-run-test"
OWN_SETTINGS = ("ANTHROPIC_", "COMPANION_", "TELEGRAM_", "DISCORD_", "DATABASE_URL")


def companion_env(
    *,
    data_dir: Path,
    database_url: str | None,
    anthropic: FakeAnthropicAPI | None = None,
    telegram: FakeTelegramAPI | None = None,
    **settings: str,
) -> dict[str, str]:
    """The environment of a `companion` process: the fakes given, the database (none:
    the embedded one in `data_dir`), JSON logs, and any further `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(OWN_SETTINGS)}
    env |= {
        "COMPANION_DATA_DIR": str(data_dir),
        "COMPANION_BURST_WINDOW_SECONDS": "0.05",
        "COMPANION_LOG_FORMAT": "json",
        "USER": "tester",
    }
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    if anthropic is not None:
        env |= {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": anthropic.base_url}
    if telegram is not None:
        env |= {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_API_BASE_URL": telegram.base_url}
    return env | settings


async def start_companion(
    *args: str, env: dict[str, str], cwd: Path, stdin: int = asyncio.subprocess.DEVNULL
) -> asyncio.subprocess.Process:
    """`companion ARGS` as a child process with its output captured."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "adapters.cli",
        *args,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )


async def finish(process: asyncio.subprocess.Process, within: float = 30) -> tuple[str, str]:
    """Wait for the process to exit; its stdout and stderr."""
    out, err = await asyncio.wait_for(process.communicate(), timeout=within)
    return out.decode(), err.decode()


async def terminate(process: asyncio.subprocess.Process, within: float = 30) -> str:
    """SIGTERM, then wait for the exit; its stderr (the logs)."""
    process.send_signal(signal.SIGTERM)
    _out, err = await finish(process, within)
    return err


class RunningCompanion:
    """A started `companion` process whose log lines (stderr, JSON) are read as they come,
    so a test can wait for one."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        self.process = process
        self.logs: list[dict[str, Any]] = []
        self._raw: list[str] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read(process.stderr))

    @classmethod
    async def start(
        cls, *args: str, env: dict[str, str], cwd: Path, stdin: int = asyncio.subprocess.DEVNULL
    ) -> RunningCompanion:
        """`companion ARGS`, its stderr read line by line."""
        return cls(await start_companion(*args, env=env, cwd=cwd, stdin=stdin))

    @property
    def stderr(self) -> str:
        """Everything written to stderr so far."""
        return "".join(self._raw)

    async def _read(self, stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            line = raw.decode(errors="replace")
            self._raw.append(line)
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    self.logs.append(entry)
            self._changed.set()
        self._changed.set()

    async def log(self, event: str, within: float = 20) -> dict[str, Any]:
        """The first log line of `event`, once it is written (fails if the process exits
        or `within` seconds pass first)."""
        async with asyncio.timeout(within):
            while True:
                found = next((entry for entry in self.logs if entry.get("event") == event), None)
                if found is not None:
                    return found
                if self._reader.done():
                    raise AssertionError(f"exited without logging {event}:\n{self.stderr[-3000:]}")
                self._changed.clear()
                await self._changed.wait()

    async def wait(self, within: float = 30) -> int:
        """Wait for the exit; the exit code."""
        await asyncio.wait_for(self.process.wait(), timeout=within)
        await self._reader
        return self.process.returncode or 0

    async def terminate(self, within: float = 30) -> int:
        """SIGTERM, then wait for the exit; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return await self.wait(within)

    async def kill(self) -> None:
        """SIGKILL if still running (cleanup after a failed test)."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        await self._reader
