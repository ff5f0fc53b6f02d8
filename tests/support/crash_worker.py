"""The child process of the crash tests: imports the whole bot once, then forks one worker
per `spawn` line on stdin, so each worker starts in a fraction of a second and can be
killed with SIGKILL at any point.

A worker runs what `companion run` runs, against the loopback fakes named in its config:
the Telegram adapter, the scheduler's jobs (check-ins, outbox recovery, memory sweeps)
on short intervals, and the Anthropic client. It prints `ready <pid>` once it polls, and
stops cleanly on SIGTERM.

Protocol (one line each): `spawn <json config>` → `spawned <pid>`; `wait <pid>` →
`exited <pid> <status>` (the negative signal number when killed).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import alembic.script  # noqa: F401  (imported here once, not in every worker)
from pydantic import SecretStr

import bot.anthropic_llm  # noqa: F401  (build_core imports it lazily)
from adapters.telegram_bot import TelegramAdapter
from bot.bootstrap import build_core
from bot.config import Settings
from bot.logs import configure_logging
from scheduler.deps import SchedulerConfig
from scheduler.runner import run_scheduler

API_KEY = "sk-ant-crash-test"
TOKEN = "123456789:AAFakeTokenForTestsOnly_abcdefghijklmno"


def worker_settings(config: dict[str, Any]) -> Settings:
    """The bot's settings for one worker, pointed at the fakes."""
    return Settings(
        database_url=SecretStr(config["database_url"]),
        data_dir=Path(config["data_dir"]),
        anthropic_api_key=SecretStr(API_KEY),
        anthropic_base_url=config["anthropic_url"],
        telegram_bot_token=SecretStr(TOKEN),
        telegram_api_base_url=config["telegram_url"],
        burst_window_seconds=0.05,
        rate_limit_per_minute=6000,
        extract_every_n_messages=3,
        llm_max_retries=1,
        llm_timeout_seconds=5,
    )


def scheduler_config(config: dict[str, Any]) -> SchedulerConfig:
    """The scheduler's jobs on short intervals and a short lease."""
    return SchedulerConfig(
        tick_seconds=0.25,
        sweep_seconds=0.25,
        nightly_seconds=3600,
        lease=timedelta(seconds=float(config["lease_seconds"])),
        retry_delay=timedelta(seconds=1),
        concurrency=4,
        misfire_grace_seconds=5,
    )


async def serve(config: dict[str, Any]) -> None:
    """Run the bot until SIGTERM."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    core = await build_core(worker_settings(config))
    adapter = TelegramAdapter(core)
    try:
        await adapter.start()
        print(f"ready {os.getpid()}", flush=True)
        await run_scheduler(core, stop, config=scheduler_config(config))
    finally:
        await adapter.stop()
        await core.aclose()


def spawn(config: dict[str, Any]) -> int:
    """Fork a worker; in the child, run it and never return."""
    pid = os.fork()
    if pid != 0:
        return pid
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        asyncio.run(serve(config))
        code = 0
    except BaseException as exc:
        print(f"worker {os.getpid()} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    """Read commands until stdin closes."""
    configure_logging("INFO", "json")
    for line in sys.stdin:
        command, _, rest = line.strip().partition(" ")
        if command == "spawn":
            print(f"spawned {spawn(json.loads(rest))}", flush=True)
        elif command == "wait":
            pid, status = os.waitpid(int(rest), 0)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            print(f"exited {pid} {code}", flush=True)


if __name__ == "__main__":
    main()
