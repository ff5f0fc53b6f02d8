"""`companion run`, the composition root, as a real process: it starts the configured
platform against a loopback Telegram, answers through the real anthropic SDK, and stops
cleanly on SIGTERM; a rejected token is a one-line error; two scheduler processes on one
database reach each person once."""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.conversations import SqlConversationStore
from memory.store.tables import Message, Outreach, User
from tests.fakes.anthropic_api import FakeAnthropicAPI, Step, TextReply, ToolUseReply
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.companion_process import KEY, companion_env, start_companion, terminate
from tests.support.timezone_question import plain

ALICE = 4242


def _env(
    anthropic: FakeAnthropicAPI, telegram: FakeTelegramAPI, database_url: str, tmp: Path
) -> dict[str, str]:
    return companion_env(
        data_dir=tmp, database_url=database_url, anthropic=anthropic, telegram=telegram
    )


async def test_run_answers_on_telegram_and_stops_on_sigterm(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(api_key=KEY) as anthropic, FakeTelegramAPI() as telegram:
        anthropic.queue_text("Hello from the real process.")
        process = await _run_process(
            [], _env(anthropic, telegram, database_url, tmp_path), tmp_path
        )
        try:
            telegram.push_message(ALICE, "hi from telegram", first_name="Alice")
            sent = await telegram.wait_for_sent(ALICE, within=30)
            assert [plain(m.text) for m in sent] == ["Hello from the real process."]
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
        process = await _run_process(
            [], _env(anthropic, telegram, database_url, tmp_path), tmp_path
        )
        _out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    last_line = err.decode().strip().splitlines()[-1]
    assert process.returncode == 2
    assert last_line.startswith("companion: ") and "TELEGRAM_BOT_TOKEN" in last_line
    assert "Traceback" not in err.decode()


async def _due_person(db: async_sessionmaker[AsyncSession], telegram_id: int, name: str) -> int:
    """A person on Telegram whose daily check-in fell due a minute ago (real time)."""
    store = SqlConversationStore(db)
    person = await store.ensure_person(
        platform="telegram",
        platform_user_id=str(telegram_id),
        chat_id=str(telegram_id),
        display_name=name,
    )
    now = datetime.now(UTC)
    await store.update_person(
        person.id,
        timezone="UTC",
        checkin_time=(now - timedelta(minutes=1)).time().replace(microsecond=0),
        quiet_start=None,
        quiet_end=None,
    )
    async with db.begin() as s:
        await s.execute(
            update(User)
            .where(User.id == person.id)
            .values(next_checkin_at=now - timedelta(minutes=1))
        )
    return person.id


async def _run_process(
    args: list[str], env: dict[str, str], cwd: Path
) -> asyncio.subprocess.Process:
    """`companion run ARGS` as a child process."""
    return await start_companion("run", *args, env=env, cwd=cwd)


async def _stop(process: asyncio.subprocess.Process) -> str:
    err = await terminate(process)
    assert process.returncode == 0, err[-2000:]
    return err


async def test_scheduler_only_sends_due_checkins_and_reads_no_updates(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    bob = await _due_person(db, 5151, "Bob")
    async with FakeAnthropicAPI(api_key=KEY) as anthropic, FakeTelegramAPI() as telegram:
        telegram.start_chat(5151, "Bob")
        anthropic.queue_tool_use("decide_checkin", {"send": True, "message": "Morning, Bob!"})
        process = await _run_process(
            ["--scheduler-only"], _env(anthropic, telegram, database_url, tmp_path), tmp_path
        )
        try:
            sent = await telegram.wait_for_sent(5151, within=30)
            assert [m.text for m in sent] == ["Morning, Bob!"]
        finally:
            await _stop(process)
        assert telegram.calls_of("getUpdates") == []
    async with db() as s:
        rows = (await s.execute(select(Outreach.kind, Outreach.status))).all()
        next_at = await s.scalar(select(User.next_checkin_at).where(User.id == bob))
    assert [tuple(r) for r in rows] == [("checkin", "sent")]
    assert next_at is not None and next_at > datetime.now(UTC) + timedelta(hours=12)


async def test_two_scheduler_processes_reach_each_person_exactly_once(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    people = [7000 + i for i in range(30)]
    for telegram_id in people:
        await _due_person(db, telegram_id, f"Person {telegram_id}")

    def answer(body: dict[str, Any]) -> Step:
        if (body.get("tool_choice") or {}).get("name") == "decide_checkin":
            return ToolUseReply("decide_checkin", {"send": True, "message": "Good morning!"})
        return TextReply("ok")

    async with (
        FakeAnthropicAPI(api_key=KEY, responder=answer) as anthropic,
        FakeTelegramAPI() as telegram,
    ):
        for telegram_id in people:
            telegram.start_chat(telegram_id, "Someone")
        env = _env(anthropic, telegram, database_url, tmp_path)
        both = await asyncio.gather(
            *(_run_process(["--scheduler-only"], env, tmp_path) for _ in range(2))
        )
        try:
            await telegram.wait_for(lambda: all(telegram.sent[p] for p in people), within=45)
            await asyncio.sleep(2)  # a second copy of any check-in would arrive by now
        finally:
            errors = [await _stop(process) for process in both]
        assert {p: len(telegram.sent[p]) for p in people} == dict.fromkeys(people, 1)
    assert all('"role": "scheduler"' in err for err in errors)
    async with db() as s:
        rows = (await s.execute(select(Outreach.kind, Outreach.status))).all()
    assert sorted(tuple(r) for r in rows) == [("checkin", "sent")] * len(people)


async def test_no_scheduler_answers_but_never_reaches_out(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    await _due_person(db, 5151, "Bob")
    async with FakeAnthropicAPI(api_key=KEY) as anthropic, FakeTelegramAPI() as telegram:
        telegram.start_chat(5151, "Bob")
        anthropic.queue_text("Hi Alice.")
        process = await _run_process(
            ["--no-scheduler"], _env(anthropic, telegram, database_url, tmp_path), tmp_path
        )
        try:
            telegram.push_message(ALICE, "hello", first_name="Alice")
            sent = await telegram.wait_for_sent(ALICE, within=30)
            assert [plain(m.text) for m in sent] == ["Hi Alice."]
        finally:
            err = await _stop(process)
        recipients = {str(call["chat_id"]) for call in telegram.calls_of("sendMessage")}
        assert recipients == {str(ALICE)}
    assert '"role": "adapters"' in err
    async with db() as s:
        assert (await s.execute(select(Outreach.id))).all() == []


async def test_scheduler_only_without_a_platform_is_a_clear_error(
    database_url: str, tmp_path: Path
) -> None:
    async with FakeAnthropicAPI(api_key=KEY) as anthropic, FakeTelegramAPI() as telegram:
        env = _env(anthropic, telegram, database_url, tmp_path)
        del env["TELEGRAM_BOT_TOKEN"]
        process = await _run_process(["--scheduler-only"], env, tmp_path)
        _out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 2
    assert "--scheduler-only needs a platform" in err.decode().strip().splitlines()[-1]
