"""The console adapter end to end: the real `companion` process, the real anthropic SDK
against a loopback Messages API, and the real test PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.conversations import SqlConversationStore
from memory.store.tables import Message, User
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.openai_api import FakeOpenAIAPI, ModelTraits

KEY = "sk-ant-test-key"


def _env(fake: FakeAnthropicAPI | None, database_url: str, tmp_path: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANTHROPIC_", "OPENAI_", "COMPANION_", "TELEGRAM_", "DISCORD_"))
    }
    env.update(
        DATABASE_URL=database_url,
        COMPANION_DATA_DIR=str(tmp_path),
        COMPANION_LLM_MAX_RETRIES="2",
        COMPANION_LLM_TIMEOUT_SECONDS="1",
        COMPANION_LOG_FORMAT="json",
        USER="tester",
    )
    if fake is not None:
        env.update(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=fake.base_url)
    return env


async def _companion(
    *args: str, stdin: str, env: dict[str, str], cwd: Path
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "adapters.cli",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


async def test_a_terminal_conversation_survives_rate_limits_outages_and_restarts(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(api_key=KEY) as fake:
        fake.queue_text("Hi Tester! How was your day?")
        fake.queue_error(429, retry_after=0)
        fake.queue_text("A 429 did not stop me.")
        fake.queue_error(529)
        fake.queue_delay(5)  # longer than the client's timeout
        fake.queue_error(500)
        fake.queue_text("I'm here.")
        lines = "hello\nI went climbing today\nmy cat is called Miso\nare you there?\n"
        code, out, err = await _companion(
            "chat", stdin=lines, env=_env(fake, database_url, tmp_path), cwd=tmp_path
        )
        assert code == 0, err
        assert "companion> Hi Tester! How was your day?" in out
        assert "companion> A 429 did not stop me." in out
        assert "language model isn't answering" in out  # the apology after 529, timeout, 500
        assert "companion> I'm here." in out
        last_turns = [m["content"] for m in fake.requests[-1]["messages"]]
        assert "my cat is called Miso" in str(last_turns)
        assert fake.requests[0]["system"][0]["cache_control"] == {"type": "ephemeral"}

        # A restart: a new process over the same database keeps the whole session.
        code, out, err = await _companion(
            "chat", stdin="still me\n", env=_env(fake, database_url, tmp_path), cwd=tmp_path
        )
        assert code == 0, err
        assert "my cat is called Miso" in str(fake.requests[-1]["messages"])
    async with db() as s:
        rows = (
            await s.scalars(select(Message).where(Message.role == "user").order_by(Message.id))
        ).all()
    assert [r.content for r in rows] == [
        "hello",
        "I went climbing today",
        "my cat is called Miso",
        "are you there?",
        "still me",
    ]
    assert "Miso" not in err  # no message text in logs at INFO


async def test_commands_and_bad_input_in_the_terminal(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(api_key=KEY) as fake:
        lines = "/help\n/nonsense\n   \n" + "x" * 20000 + "\n"
        code, out, err = await _companion(
            "chat", stdin=lines, env=_env(fake, database_url, tmp_path), cwd=tmp_path
        )
    assert code == 0, err
    assert "/help" in out and "I don't know the command /nonsense" in out
    assert "I didn't catch anything" in out
    assert "20,000 characters" in out
    assert fake.requests == []


async def test_without_a_key_it_says_exactly_what_to_set(database_url: str, tmp_path: Path) -> None:
    for command in ("run", "chat"):
        code, _out, err = await _companion(
            command, stdin="", env=_env(None, database_url, tmp_path), cwd=tmp_path
        )
        assert code == 2
        assert "ANTHROPIC_API_KEY is not set" in err and ".env" in err


async def test_a_local_model_needs_no_key_and_a_missing_model_is_named(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    models = {"llama3.1:8b": ModelTraits(tools=False, response_format=False)}
    async with FakeOpenAIAPI(models=models) as fake:
        env = _env(None, database_url, tmp_path)
        env.update(COMPANION_LLM_PROVIDER="openai", OPENAI_BASE_URL=fake.base_url)
        code, _out, err = await _companion("chat", stdin="", env=env, cwd=tmp_path)
        assert code == 2
        assert "COMPANION_CHAT_MODEL is not set" in err

        env.update(COMPANION_CHAT_MODEL="llama3.1:8b")
        fake.queue_text("Hi Tester, from a local model!")
        code, out, err = await _companion("chat", stdin="hello\n", env=env, cwd=tmp_path)
    assert code == 0, err
    assert "companion> Hi Tester, from a local model!" in out
    assert fake.requests[0]["model"] == "llama3.1:8b" and fake.requests[0]["stream"] is True
    async with db() as s:
        rows = (await s.scalars(select(Message.content).order_by(Message.id))).all()
    assert list(rows) == ["hello", "Hi Tester, from a local model!"]


async def test_help_lists_the_commands(database_url: str, tmp_path: Path) -> None:
    code, out, _ = await _companion(
        "--help", stdin="", env=_env(None, database_url, tmp_path), cwd=tmp_path
    )
    assert code == 0
    for command in ("run", "chat", "db"):
        assert command in out


async def test_the_terminal_prints_a_check_in_when_it_falls_due(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    store = SqlConversationStore(db)
    person = await store.ensure_person(
        platform="console", platform_user_id="tester", chat_id="console", display_name="tester"
    )
    now = datetime.now(UTC)
    await store.update_person(
        person.id, timezone="UTC", checkin_time=now.time(), quiet_start=None, quiet_end=None
    )
    async with db.begin() as s:
        await s.execute(
            update(User)
            .where(User.id == person.id)
            .values(next_checkin_at=now - timedelta(seconds=5))
        )
    async with FakeAnthropicAPI(api_key=KEY) as fake:
        fake.queue_tool_use(
            "decide_checkin", {"send": True, "message": "Morning! How did you sleep?"}
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "adapters.cli",
            "chat",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(fake, database_url, tmp_path),
            cwd=tmp_path,
        )
        assert process.stdout is not None and process.stdin is not None
        seen: list[str] = []
        async with asyncio.timeout(30):
            while not any("How did you sleep?" in line for line in seen):
                seen.append((await process.stdout.readline()).decode())
        process.stdin.close()
        await asyncio.wait_for(process.wait(), timeout=30)
    assert "companion> Morning! How did you sleep?\n" in seen
    assert process.returncode == 0


def _the_export(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The one export file `companion chat` saved in `folder`, and its data."""
    (export,) = folder.glob("companion-export-*.json")
    return export, json.loads(export.read_text("utf-8"))


async def test_remember_see_forget_by_number_and_export_in_the_terminal(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(api_key=KEY) as fake:
        fake.queue_tool_use("classify_memory", {"category": "relationship", "importance": 7})
        fake.queue_text("One what?")
        lines = [
            "/remember my cat is called Miso",
            "/memory",
            "1",  # 🗑 m1, the first button under /memory
            "/help",  # no buttons: the Undo shown before is no longer a choice
            "1",  # so this is just a message
            "/export",
        ]
        code, out, err = await _companion(
            "chat",
            stdin="\n".join(lines) + "\n",
            env=_env(fake, database_url, tmp_path),
            cwd=tmp_path,
        )
    assert code == 0, err
    assert "Got it — I'll remember: “my cat is called Miso” (m1)." in out
    assert "m1 · my cat is called Miso" in out and "  [1] 🗑 m1\n  [2] 📌 m1" in out
    assert "companion> Forgotten: “my cat is called Miso” (m1)." in out
    assert "companion> One what?" in out and "Undone" not in out
    # The person's words close the prompt, after the turn's context block.
    assert fake.requests[-1]["messages"][-1]["content"][-1] == {"type": "text", "text": "1"}
    export, data = _the_export(tmp_path)
    assert f"(saved {export})" in out
    assert [(m["content"], m["status"]) for m in data["memories"]] == [
        ("my cat is called Miso", "forgotten")
    ]
    async with db() as s:
        said = (
            await s.execute(select(Message.content, Message.status).where(Message.role == "user"))
        ).all()
    # Commands and button presses are not conversation; /remember keeps its text as the
    # memory's source, a message never read as conversation.
    assert [tuple(row) for row in said if row.status != "answered"] == [
        ("/remember my cat is called Miso", "command")
    ]
    assert [row.content for row in said if row.status == "answered"] == ["1"]
