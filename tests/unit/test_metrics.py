"""The metrics registry, the turn and job scopes, and the health registry, in memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from adapters.stats import table
from bot import metrics
from bot.health import Health, HealthReport
from bot.llm import Usage
from memory.store.items import ExtractionOutcome


def value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_turn_is_counted_timed_and_its_model_time_kept_out_of_the_overhead() -> None:
    handled = value("companion_messages_handled_total", platform="unit", kind="message")
    turns = value("companion_reply_latency_seconds_count", kind="message")
    overhead = value("companion_turn_overhead_seconds_sum", kind="message")
    with metrics.observe_turn("unit", "message"):
        metrics.record_llm_call("unit-model", 30.0, Usage(100, 20, 50, 7))
    assert value("companion_messages_handled_total", platform="unit", kind="message") == handled + 1
    assert value("companion_reply_latency_seconds_count", kind="message") == turns + 1
    assert value("companion_turn_overhead_seconds_sum", kind="message") == overhead


def test_model_calls_count_latency_and_every_kind_of_token() -> None:
    before = {
        kind: value("companion_llm_tokens_total", model="unit-tokens", kind=kind)
        for kind in ("input", "output", "cache_read", "cache_write")
    }
    metrics.record_llm_call("unit-tokens", 0.4, Usage(100, 20, 50, 7))
    after = {
        kind: value("companion_llm_tokens_total", model="unit-tokens", kind=kind) for kind in before
    }
    assert {k: after[k] - before[k] for k in before} == {
        "input": 100,
        "output": 20,
        "cache_read": 50,
        "cache_write": 7,
    }
    assert value("companion_llm_request_latency_seconds_bucket", model="unit-tokens", le="0.5") >= 1


def test_extraction_outreach_and_jobs_are_counted() -> None:
    failed = value("companion_extractions_total", result="failed")
    updated = value("companion_extracted_memories_total", outcome="updated")
    metrics.record_extraction(ExtractionOutcome(added=1, updated=2, skipped=3))
    metrics.record_extraction(ExtractionOutcome(failed=True))
    assert value("companion_extractions_total", result="failed") == failed + 1
    assert value("companion_extracted_memories_total", outcome="updated") == updated + 2

    outreach = {"kind": "checkin", "status": "skipped", "reason": "unit_quiet"}
    sent = {"kind": "followup", "status": "sent", "reason": "none"}
    skipped_before, sent_before = (
        value("companion_outreach_total", **outreach),
        value("companion_outreach_total", **sent),
    )
    metrics.record_outreach("checkin", "skipped", "unit_quiet")
    metrics.record_outreach("followup", "sent")
    assert value("companion_outreach_total", **outreach) == skipped_before + 1
    assert value("companion_outreach_total", **sent) == sent_before + 1

    runs = value("companion_job_duration_seconds_count", job="unit-patrol")
    metrics.record_job("unit-patrol", 12.5)
    with pytest.raises(RuntimeError), metrics.observe_job("unit-patrol"):
        raise RuntimeError("a failed run is timed too")
    assert value("companion_job_duration_seconds_count", job="unit-patrol") == runs + 2


def test_scopes_bind_a_short_request_id_to_log_lines() -> None:
    log = structlog.get_logger("tests.metrics")
    with structlog.testing.capture_logs(
        processors=[structlog.contextvars.merge_contextvars]
    ) as logs:
        with metrics.observe_turn("unit", "command") as turn_id:
            log.info("unit.in_turn")
        with metrics.observe_job("unit-job") as job_id:
            log.info("unit.in_job")
        log.info("unit.outside")
    assert [entry.get("request_id") for entry in logs] == [turn_id, job_id, None]
    assert len(turn_id) == 8 and turn_id != job_id
    assert logs[1]["job"] == "unit-job"


PRODUCTION_LOGGING = """
import structlog
from bot import metrics
from bot.logs import configure_logging

configure_logging("INFO", "json")
log = structlog.get_logger("unit")
with metrics.observe_turn("console", "message"):
    log.info("unit.turn", text="my very private words", chars=21)
    log.debug("unit.detail", text="not shown at INFO")
log.warning("unit.after", error="bad key sk-ant-api03-abcdefghijklmnop")
"""


def test_production_json_logs_carry_the_request_id_and_no_message_text() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PRODUCTION_LOGGING],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [line["event"] for line in lines] == ["unit.turn", "unit.after"]
    turn, after = lines
    assert len(turn["request_id"]) == 8
    assert (turn["text"], turn["chars"], turn["level"]) == ("[redacted]", 21, "info")
    assert "request_id" not in after
    assert after["error"] == "bad key [secret]"
    assert "private" not in done.stderr


def test_recording_never_raises_and_labels_are_bounded() -> None:
    metrics.record_job("unit-bad", "not a number")  # type: ignore[arg-type]
    metrics.record_llm_call("unit-bad", 1.0, None)  # type: ignore[arg-type]
    metrics.record_outreach("checkin", "failed", "x" * 500)
    assert value("companion_outreach_total", kind="checkin", status="failed", reason="x" * 48) >= 1


def test_the_exposition_is_the_prometheus_text_format() -> None:
    metrics.record_message("unit", "button")
    text = metrics.exposition().decode()
    assert "# TYPE companion_messages_handled_total counter" in text
    assert 'companion_messages_handled_total{kind="button",platform="unit"}' in text
    assert "# TYPE companion_reply_latency_seconds histogram" in text
    assert metrics.CONTENT_TYPE.startswith("text/plain; version=0.0.4")


class Ticks:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_scheduler_is_alive_while_it_beats_and_stalled_after_three_minutes() -> None:
    ticks = Ticks()
    health = Health(monotonic=ticks)
    assert health.beat_status() == (True, "not running")
    health.beat("scheduler")
    ticks.now += 179
    assert health.beat_status() == (True, "alive")
    ticks.now += 2
    assert health.beat_status() == (False, "stalled (no beat for 181s)")
    health.beat()
    assert health.beat_status() == (True, "alive")


def test_component_states_and_the_report_body() -> None:
    health = Health()
    health.set("telegram", True, "connected")
    health.set("discord", False)
    states = health.states()
    assert (states["telegram"].ok, states["discord"].detail) == (True, "")
    report = HealthReport("ok", {"telegram": "connected"}, "alive")
    assert report.ok
    assert report.as_json() == {
        "status": "ok",
        "database": "ok",
        "adapters": {"telegram": "connected"},
        "scheduler": "alive",
    }
    bad = HealthReport("timeout", problems=("database timeout",))
    assert bad.as_json()["status"] == "unhealthy"
    assert bad.as_json()["problems"] == ["database timeout"]


def test_stats_tables_align_text_left_and_numbers_right() -> None:
    assert table(["name", "n"], [["a", 1], ["bb", 1234], ["c", None]]).splitlines() == [
        "name      n",
        "----  -----",
        "a         1",
        "bb    1,234",
        "c         -",
    ]
