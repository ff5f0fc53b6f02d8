"""The load run of `bench/load_telegram.py` as a test: 1,000 simulated people chatting
for one minute through the Telegram fake with the real `companion run` process, the test
PostgreSQL and a fake model that takes a second per answer.

It asserts what must hold under load: no errors, nothing lost, nothing answered or stored
twice, a clean stop, bounded memory. Timing is reported, never asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.load_telegram import run_load
from tests.support.load_crowd import LoadConfig

FULL = LoadConfig()  # 1,000 people for 60 s, as the benchmark
MAX_RSS_MB = 600
MAX_GROWTH_MB = 100


@pytest.mark.timeout(360)  # 60 s of chat, then up to 120 s for the last replies
async def test_a_thousand_people_chatting_for_a_minute_lose_nothing_and_answer_once(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    result = await run_load(FULL, workdir=tmp_path, database_url=database_url)
    print(f"\n{result.report()}")

    assert result.errors == []
    assert result.sent >= FULL.people
    assert (result.lost, result.stored_twice) == (0, 0)
    assert (result.unanswered, result.answered_twice) == (0, 0)
    assert result.exit_code == 0
    assert max(mb for _, mb in result.rss_mb) < MAX_RSS_MB
    assert result.rss_growth_mb < MAX_GROWTH_MB
