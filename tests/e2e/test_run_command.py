"""`companion run`, the composition root, as a real process: it starts the configured
platform against a loopback Telegram, answers through the real anthropic SDK, and stops
cleanly on SIGTERM; a rejected token is a one-line error."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.tables import Message
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.telegram_api import TOKEN, FakeTelegramAPI

KEY = "sk-ant-run-test"
ALICE = 4242


def _env(
    anthropic: FakeAnthropicAPI, telegram: FakeTelegramAPI, database_url: str, tmp: Path
) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "COMPANION_", "TELEGRAM_", "DISCORD_"))
    }
    return env | {
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": anthropic.base_url,
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": telegram.base_url,
        "DATABASE_URL": database_url,
        "COMPANION_DATA_DIR": str(tmp),
        "COMPANION_BURST_WINDOW_SECONDS": "0.05",
        "COMPANION_LOG_FORMAT": "json",
    }


async def test_run_answers_on_telegram_and_stops_on_sigterm(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(api_key=KEY) as anthropic, FakeTelegramAPI() as telegram:
        anthropic.queue_text("Hello from the real process.")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "adapters.cli",
            "run",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(anthropic, telegram, database_url, tmp_path),
            cwd=tmp_path,
        )
        try:
            telegram.push_message(ALICE, "hi from telegram", first_name="Alice")
            sent = await telegram.wait_for_sent(ALICE, within=30)
            assert [m.text for m in sent] == ["Hello from the real process."]
        finally:
            process.send_signal(signal.SIGTERM)
            _out, err = await asyncio.wait_for(process.communicate(), timeout=30)
        assert process.returncode == 0, err.decode()[-2000:]
        assert b"run.stopped" in err
    async with db() as s:
        stored = (await s.scalars(select(Message).order_by(Message.id))).all()
    assert [(m.role, m.content) for m in stored] == [
        ("user", "hi from telegram"),
        ("assistant", "Hello from the real process."),
    ]


async def test_a_rejected_token_is_a_clear_one_line_error(
    database_url: str, tmp_path: Path
) -> None:
    async with (
        FakeAnthropicAPI(api_key=KEY) as anthropic,
        FakeTelegramAPI(token="1:other") as telegram,
    ):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "adapters.cli",
            "run",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(anthropic, telegram, database_url, tmp_path),
            cwd=tmp_path,
        )
        _out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    last_line = err.decode().strip().splitlines()[-1]
    assert process.returncode == 2
    assert last_line.startswith("companion: ") and "TELEGRAM_BOT_TOKEN" in last_line
    assert "Traceback" not in err.decode()
