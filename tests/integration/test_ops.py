"""Operations on real PostgreSQL: `/healthz` and `/metrics` over HTTP, `companion stats`,
and request ids with redaction in the JSON logs of a turn."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, MutableMapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.ops_http import OpsServer
from adapters.stats import print_stats, stats_report
from bot import metrics
from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.domain import ButtonPress, IncomingMessage
from bot.health import Health
from bot.llm import LLMRequest
from bot.logs import redact
from memory.store.database import create_engine
from memory.store.tables import Outreach
from tests.conftest import FakeClock
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.chat_llm import ScriptedLLM, text
from tests.fakes.extractor import RuleExtractor

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def says(body: str, user: str = "alice") -> IncomingMessage:
    return IncomingMessage("console", user, body, chat_id=f"chat-{user}", display_name=user)


@pytest.fixture
async def ops(core: Core) -> AsyncIterator[str]:
    """The endpoint for `core` on a free loopback port; yields its base URL."""
    server = OpsServer(core.engine, core.health, host="127.0.0.1", port=0)
    await server.start()
    yield f"http://127.0.0.1:{server.port}"
    await server.stop()


async def _get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, response.headers["Content-Type"], await response.text()


def _samples(exposition: str) -> Samples:
    """Every sample of the text format by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _registry(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_healthz_reports_database_adapters_and_scheduler(core: Core, ops: str) -> None:
    status, kind, body = await _get(f"{ops}/healthz")
    assert (status, kind.split(";")[0]) == (200, "application/json")
    assert json.loads(body) == {
        "status": "ok",
        "database": "ok",
        "adapters": {},
        "scheduler": "not running",
    }

    core.health.set("telegram", True, "connected")
    core.health.set("discord", True, "connected")
    core.health.beat("scheduler")
    status, _, body = await _get(f"{ops}/healthz")
    assert status == 200
    report = json.loads(body)
    assert report["adapters"] == {"discord": "connected", "telegram": "connected"}
    assert report["scheduler"] == "alive"

    core.health.set("discord", False, "disconnected")
    status, _, body = await _get(f"{ops}/healthz")
    assert status == 503
    assert json.loads(body)["problems"] == ["discord disconnected"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_healthz_is_503_when_the_database_is_unreachable() -> None:
    engine = create_engine(f"postgresql://nobody:secret@127.0.0.1:{_closed_port()}/none")
    server = OpsServer(engine, Health(), host="127.0.0.1", port=0)
    await server.start()
    try:
        status, _, body = await _get(f"http://127.0.0.1:{server.port}/healthz")
        _, _, exposition = await _get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        await server.stop()
        await engine.dispose()
    report = json.loads(body)
    assert status == 503
    assert report["status"] == "unhealthy"
    assert report["database"].startswith("unreachable (")
    assert "secret" not in body
    assert _value(_samples(exposition), "companion_component_up", component="database") == 0


@pytest.fixture
async def anthropic_api() -> AsyncIterator[FakeAnthropicAPI]:
    """The loopback Messages API, which simulates prompt caching."""
    async with FakeAnthropicAPI() as api:
        yield api


@pytest.fixture
async def live_core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    tmp_path: Path,
    anthropic_api: FakeAnthropicAPI,
) -> AsyncIterator[Core]:
    """A core whose model is the real `AnthropicLLM` talking to the loopback API, with a
    persona long enough (over 1,024 tokens) for the API to cache it on its own."""
    persona = tmp_path / "persona.md"
    persona.write_text("You are Mira, a warm companion who listens closely. " * 90)
    settings = Settings(
        persona_file=persona,
        database_url=database_url,
        data_dir=tmp_path,
        anthropic_api_key="sk-ant-ops-test",  # type: ignore[arg-type]
        anthropic_base_url=anthropic_api.base_url,
        chat_model="claude-ops-metrics",
    )
    built = await build_core(settings, clock=clock)
    yield built
    await built.aclose()


async def test_metrics_count_turns_latency_and_tokens_by_model(live_core: Core) -> None:
    model = "claude-ops-metrics"
    before = {
        "messages": _registry(
            "companion_messages_handled_total", platform="console", kind="message"
        ),
        "commands": _registry(
            "companion_messages_handled_total", platform="console", kind="command"
        ),
        "turns": _registry("companion_reply_latency_seconds_count", kind="message"),
        "llm": _registry("companion_llm_request_latency_seconds_count", model=model),
        "cache_read": _registry("companion_llm_tokens_total", model=model, kind="cache_read"),
    }
    server = OpsServer(live_core.engine, live_core.health, host="127.0.0.1", port=0)
    await server.start()
    try:
        await live_core.router.handle(says("Hello there"))
        await live_core.router.handle(says("How are you today?"))
        await live_core.router.handle(says("/help"))
        await live_core.background.drain()
        status, content_type, exposition = await _get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        await server.stop()

    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    samples = _samples(exposition)
    messages = ("companion_messages_handled_total", "console")
    handled = _value(samples, messages[0], platform=messages[1], kind="message")
    assert handled - before["messages"] == 2
    commands = _value(samples, messages[0], platform=messages[1], kind="command")
    assert commands - before["commands"] == 1
    turns = _value(samples, "companion_reply_latency_seconds_count", kind="message")
    assert turns - before["turns"] == 2
    assert _value(samples, "companion_reply_latency_seconds_bucket", kind="message", le="+Inf")
    assert _value(samples, "companion_turn_overhead_seconds_count", kind="message") >= 2
    llm_calls = _value(samples, "companion_llm_request_latency_seconds_count", model=model)
    assert llm_calls - before["llm"] >= 2
    for kind in ("input", "output", "cache_write"):
        assert _value(samples, "companion_llm_tokens_total", model=model, kind=kind) > 0
    cache_read = _value(samples, "companion_llm_tokens_total", model=model, kind="cache_read")
    assert cache_read > before["cache_read"], "the second turn reads the cached persona"
    assert _value(samples, "companion_component_up", component="database") == 1


async def test_a_model_outage_is_counted_by_reason(
    live_core: Core, anthropic_api: FakeAnthropicAPI
) -> None:
    model = "claude-ops-metrics"
    before = _registry("companion_llm_failures_total", model=model, reason="401")
    anthropic_api.queue_error(401)
    reply = await live_core.router.handle(says("Hello?"))
    assert "can't think straight" in reply.text
    assert _registry("companion_llm_failures_total", model=model, reason="401") - before == 1


async def test_extraction_outcomes_and_button_presses_are_counted(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    added = _registry("companion_extracted_memories_total", outcome="added")
    runs = _registry("companion_extractions_total", result="ok")
    presses = _registry("companion_messages_handled_total", platform="console", kind="button")
    extractor = RuleExtractor()
    extractor.add("nurse", content="The person works as a nurse")
    scripted_llm.tools["record_memories"] = extractor
    await core.router.handle(says("I work as a nurse, long shifts lately"))
    clock.advance(hours=2)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))
    await core.background.drain()
    await core.router.press(ButtonPress("console", "alice", "nope:1", chat_id="chat-alice"))
    assert _registry("companion_extracted_memories_total", outcome="added") - added == 1
    assert _registry("companion_extractions_total", result="ok") - runs >= 1
    pressed = _registry("companion_messages_handled_total", platform="console", kind="button")
    assert pressed - presses == 1


async def test_stats_prints_the_figures_from_the_database(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock
) -> None:
    def slow_reply(request: LLMRequest) -> Any:
        clock.advance(seconds=3)
        return text("Tell me more.")

    scripted_llm.default = slow_reply
    extractor = RuleExtractor()
    extractor.add("nurse", content="The person works as a nurse")
    scripted_llm.tools["record_memories"] = extractor
    await core.router.handle(says("I work as a nurse"))
    await core.router.handle(says("Long shifts lately"))
    await core.router.handle(says("Hi!", user="bob"))
    clock.advance(hours=2)
    await core.memory.sweep(idle_gap=timedelta(minutes=30))
    await core.background.drain()
    async with core.sessions.begin() as db:
        db.add(
            Outreach(
                user_id=1,
                kind="checkin",
                idempotency_key="checkin:1:2026-03-02",
                status="skipped",
                reason="quiet_hours",
                due_at=clock.now(),
                created_at=clock.now(),
            )
        )

    report = await stats_report(core.sessions, clock.now())

    lines = report.splitlines()
    assert _row(lines, "people") == ["2", "2", "2"]
    assert _row(lines, "from people") == ["3", "3"]
    assert _row(lines, "from companion") == ["3", "3"]
    assert _row(lines, "message to reply") == ["3", "3.00", "3.00"]
    assert _row(lines, "fake-chat 24h") == ["30", "15", "0", "0"]
    assert _row(lines, "fake-chat total") == ["30", "15", "0", "0"]
    assert _row(lines, "added") == ["1", "1"]
    assert _row(lines, "checkin skipped quiet_hours") == ["1", "1"]
    assert _row(lines, "core active") == ["1"]
    assert "nurse" not in report


async def test_the_stats_command_opens_the_configured_database_and_prints(
    core: Core, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await core.router.handle(says("Hello"))
    await print_stats(Settings(database_url=database_url, data_dir=tmp_path))
    report = capsys.readouterr().out.partition("Companion at ")[2]
    assert report.endswith("\n")
    assert _row(report.splitlines(), "from people")[-1] == "1"  # in total (24h: real time)


def _row(lines: list[str], label: str) -> list[str]:
    """The cells after `label` on the first line that starts with it."""
    leading = label.split()
    for line in lines:
        cells = line.split()
        if cells[: len(leading)] == leading:
            return cells[len(leading) :]
    raise AssertionError(f"no row {label!r} in:\n" + "\n".join(lines))


async def test_a_turn_logs_json_with_its_request_id_and_no_message_text(
    core: Core, scripted_llm: ScriptedLLM
) -> None:
    log = structlog.get_logger("tests.ops")

    def answer(request: LLMRequest) -> Any:
        log.info("test.model_called", text=request.turns[-1].content)
        return text("Tell me more.")

    scripted_llm.default = answer
    rendered: list[str] = []

    def keep(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
        rendered.append(str(event))
        raise structlog.DropEvent

    chain = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        redact,
        structlog.processors.JSONRenderer(),
        keep,
    ]
    with structlog.testing.capture_logs(processors=chain):
        await core.router.handle(says("my diagnosis is confidential"))
        await core.router.handle(says("second message"))
    lines = [json.loads(line) for line in rendered]
    model_lines = [line for line in lines if line["event"] == "test.model_called"]
    assert len(model_lines) == 2
    first, second = (line["request_id"] for line in model_lines)
    assert len(first) == 8 and int(first, 16) >= 0
    assert first != second
    assert all(line["text"] == "[redacted]" for line in model_lines)
    replied = [line for line in lines if line["event"] == "conversation.replied"]
    assert [line["request_id"] for line in replied] == [first, second]
    assert not any("confidential" in line for line in rendered)
