"""The operations endpoint as `companion run` wires it, in a real process: off unless
enabled; enabled, it listens on 127.0.0.1 only (unless told otherwise) and serves
`/healthz` and `/metrics` with the figures of that process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.config import Settings
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.companion_process import RunningCompanion, companion_env

ALICE = 4545


def test_the_endpoint_is_off_and_local_by_default() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert (settings.ops_http_enabled, settings.ops_http_host) == (False, "127.0.0.1")


async def _get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, response.headers["Content-Type"], await response.text()


async def _healthy(base: str, within: float = 15) -> dict[str, object]:
    """The /healthz report once it is 200 (the scheduler beats after its first job)."""
    async with asyncio.timeout(within):
        while True:
            status, kind, body = await _get(f"{base}/healthz")
            assert kind.startswith("application/json")
            if status == 200:
                report: dict[str, object] = json.loads(body)
                return report
            await asyncio.sleep(0.2)


def _samples(exposition: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


async def test_run_serves_healthz_and_metrics_on_localhost_when_enabled(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI() as anthropic, FakeTelegramAPI() as telegram:
        env = companion_env(
            data_dir=tmp_path,
            database_url=database_url,
            anthropic=anthropic,
            telegram=telegram,
            COMPANION_OPS_HTTP_ENABLED="true",
            COMPANION_OPS_HTTP_PORT="0",
        )
        bot = await RunningCompanion.start("run", env=env, cwd=tmp_path)
        try:
            started = await bot.log("ops_http.started")
            port = started["port"]
            assert started["bound"] == [f"127.0.0.1:{port}"]
            await bot.log("telegram.started")
            telegram.push_message(ALICE, "hello", first_name="Alice")
            await telegram.wait_for_sent(ALICE, within=15)

            base = f"http://127.0.0.1:{port}"
            report = await _healthy(base)
            assert report == {
                "status": "ok",
                "database": "ok",
                "adapters": {"telegram": "connected"},
                "scheduler": "alive",
            }
            status, kind, body = await _get(f"{base}/metrics")
            assert status == 200 and kind.startswith("text/plain; version=0.0.4")
            samples = _samples(body)
            message = frozenset({("kind", "message")})
            telegram_message = message | {("platform", "telegram")}
            assert samples[("companion_reply_latency_seconds_count", message)] == 1  # the turn
            assert samples[("companion_messages_handled_total", telegram_message)] == 1
            assert samples[("companion_component_up", frozenset({("component", "database")}))] == 1
            code = await bot.terminate()
        finally:
            await bot.kill()
    assert code == 0, bot.stderr[-3000:]
    assert [e["event"] for e in bot.logs].count("ops_http.stopped") == 1


async def test_run_serves_nothing_unless_enabled(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    async with FakeAnthropicAPI() as anthropic, FakeTelegramAPI() as telegram:
        env = companion_env(
            data_dir=tmp_path, database_url=database_url, anthropic=anthropic, telegram=telegram
        )
        bot = await RunningCompanion.start("run", "--no-scheduler", env=env, cwd=tmp_path)
        try:
            await bot.log("telegram.started")
            code = await bot.terminate()
        finally:
            await bot.kill()
    assert code == 0, bot.stderr[-3000:]
    events = [entry["event"] for entry in bot.logs]
    assert "run.started" in events and "run.stopped" in events
    assert not [event for event in events if event.startswith("ops_http")]
