"""Redaction of real database errors: a failed statement about a message that holds
personal words and a bot token is logged at ERROR with its traceback, through structlog
and through a standard-library logger, in the production JSON format; the lines keep
what an operator needs (the error class, the SQL) and lose the words and the token."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.logs import scrub_error_text

BOT_TOKEN = "123456789:AAH5rFj3l2k4j5l6k7j8h9g0f1d2s3a4q5w"
WORDS = "my lupus diagnosis came back today"
REPO = Path(__file__).resolve().parents[2]

FAILING_STATEMENTS = f"""
import asyncio, logging, sys
from datetime import UTC, datetime

import structlog
from sqlalchemy import BigInteger, bindparam, insert, select

from bot.logs import configure_logging
from memory.store.database import create_engine
from memory.store.tables import Message

CONTENT = {f"{BOT_TOKEN} {WORDS}"!r}
configure_logging("INFO", "json")
log = structlog.get_logger("unit")


async def main() -> None:
    engine = create_engine(sys.argv[1], pool_size=1)
    statements = [
        # NOT NULL violation: PostgreSQL's DETAIL quotes the failing row.
        insert(Message).values(
            role="user", content=CONTENT, platform="telegram", created_at=datetime.now(UTC)
        ),
        # A value asyncpg cannot encode: its message quotes the argument.
        select(Message.id).where(Message.id == bindparam('wanted', CONTENT, BigInteger)),
    ]
    async with engine.connect() as conn:
        for statement in statements:
            try:
                await conn.execute(statement)
            except Exception as exc:
                log.exception("unit.store_failed")
                log.error("unit.store_failed_briefly", error=str(exc))
                stdlib = logging.getLogger("asyncio")
                stdlib.error("Task exception was never retrieved", exc_info=exc)
                await conn.rollback()
    await engine.dispose()


asyncio.run(main())
"""


async def _log_lines(database_url: str) -> tuple[list[dict[str, Any]], str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FAILING_STATEMENTS,
        database_url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    _out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    output = err.decode()
    assert process.returncode == 0, output[-2000:]
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")], output


async def test_database_errors_reach_the_error_log_without_message_text_or_tokens(
    database_url: str, db: async_sessionmaker[AsyncSession]
) -> None:
    lines, output = await _log_lines(database_url)
    assert [line["event"] for line in lines[:3]] == [
        "unit.store_failed",
        "unit.store_failed_briefly",
        "Task exception was never retrieved",
    ]
    assert len(lines) == 6 and {line["level"] for line in lines} == {"error"}
    for secret in ("lupus", "diagnosis", "AAH5r", "123456789", "q5w"):
        assert secret not in output, secret
    insert_failure = lines[0]["exception"]
    assert "NotNullViolationError" in insert_failure
    assert "[SQL: INSERT INTO messages" in insert_failure
    assert "DETAIL: [redacted]" in insert_failure
    assert "[SQL parameters hidden due to hide_parameters=True]" in insert_failure
    assert "query argument $1: [redacted]" in lines[3]["exception"]
    assert lines[5]["logger"] == "asyncio" and "DataError" in lines[5]["exception"]


def test_a_rejected_model_answer_is_not_quoted() -> None:
    class Decision(BaseModel):
        send: bool

    with pytest.raises(ValidationError) as caught:
        Decision.model_validate({"send": "tell her about the divorce"})
    scrubbed = scrub_error_text(str(caught.value))
    assert "divorce" in str(caught.value) and "divorce" not in scrubbed
    assert "send\n  Input should be a valid boolean" in scrubbed
    assert "input_value=[redacted], input_type=str" in scrubbed


def test_error_text_scrubbing_keeps_the_shape_of_the_error() -> None:
    text = (
        'sqlalchemy.exc.DataError: invalid input syntax for type integer: "I feel low"\n'
        "[SQL: SELECT $1::int]\n"
        "[parameters: ('I feel low',)]\n"
        "connecting to postgresql://companion:hunter2-pass@db:5432/companion"
    )
    assert scrub_error_text(text) == (
        "sqlalchemy.exc.DataError: invalid input syntax for type integer: [redacted]\n"
        "[SQL: SELECT $1::int]\n"
        "[parameters: [redacted]]\n"
        "connecting to postgresql://companion:[secret]@db:5432/companion"
    )


LIBRARY_DUMP = f"""
import asyncio, logging, os

from telegram import Bot

from bot.logs import configure_logging
from tests.fakes.telegram_api import TOKEN, FakeTelegramAPI

os.environ["PTB_TIMEDELTA"] = "true"
configure_logging("INFO", "json")


async def main() -> None:
    async with FakeTelegramAPI() as fake:
        fake.push_raw({{"message": {{"message_id": 7, "text": {WORDS!r}}}}})
        async with Bot(TOKEN, base_url=f"{{fake.base_url}}/bot") as bot:
            try:
                await bot.get_updates(timeout=0)
            except Exception as exc:
                print("failed as expected:", type(exc).__name__)
    migration = logging.getLogger("alembic.runtime.migration")
    migration.warning("Running upgrade %s -> %s", "0022", "0023")
    logging.getLogger("discord.gateway").warning("Shard ID %s heartbeat blocked for %d s", "x", 12)


asyncio.run(main())
"""


async def test_a_library_dumping_what_it_received_never_reaches_the_log_with_it() -> None:
    # python-telegram-bot logs a batch it cannot parse raw, at CRITICAL, people's
    # messages included: the line stays, with its template and numbers only.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        LIBRARY_DUMP,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    output = err.decode()
    assert process.returncode == 0, output[-3000:]
    assert "failed as expected" in out.decode()  # the real library path was taken
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    by_event = {line["event"]: line for line in lines}
    dump = by_event["Error while parsing updates! Received data was [redacted]"]
    assert dump["level"] == "critical" and dump["logger"] == "telegram.Bot"
    assert "Running upgrade 0022 -> 0023" in by_event  # alembic's revision ids are kept
    assert "Shard ID [redacted] heartbeat blocked for 12 s" in by_event  # numbers are kept
    for secret in ("lupus", "diagnosis"):
        assert secret not in output, secret
