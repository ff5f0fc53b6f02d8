"""What the companion counts and times, in Prometheus form (`/metrics` serves `exposition`).

Recording functions are cheap and never raise: a metrics bug must not break a turn.
`observe_turn` and `observe_job` also bind a short request id into the log context, so
every log line of one turn or job can be found together.
"""

from __future__ import annotations

import contextvars
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from typing import ParamSpec

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from bot.llm import Usage
from memory.store.items import ExtractionOutcome
from memory.store.records import MemoryUse

log = structlog.get_logger(__name__)

P = ParamSpec("P")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_LABEL_CHARS = 48

REGISTRY = CollectorRegistry()

_TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
_OVERHEAD_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_JOB_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600)

MESSAGES = Counter(
    "companion_messages_handled",
    "Messages, commands and button presses received from people.",
    ["platform", "kind"],
    registry=REGISTRY,
)
REPLY_LATENCY = Histogram(
    "companion_reply_latency_seconds",
    "Whole turn, from the core receiving a message to its reply being ready.",
    ["kind"],
    buckets=_TURN_BUCKETS,
    registry=REGISTRY,
)
TURN_OVERHEAD = Histogram(
    "companion_turn_overhead_seconds",
    "Part of a turn spent outside successful model requests (database, memory, prompt).",
    ["kind"],
    buckets=_OVERHEAD_BUCKETS,
    registry=REGISTRY,
)
LLM_LATENCY = Histogram(
    "companion_llm_request_latency_seconds",
    "Successful model requests, retries included.",
    ["model"],
    buckets=_TURN_BUCKETS,
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "companion_llm_tokens",
    "Tokens by model and kind (input, output, cache_read, cache_write).",
    ["model", "kind"],
    registry=REGISTRY,
)
LLM_FAILURES = Counter(
    "companion_llm_failures",
    "Model requests given up on, by reason (HTTP status or error type).",
    ["model", "reason"],
    registry=REGISTRY,
)
EXTRACTIONS = Counter(
    "companion_extractions",
    "Extraction runs by result (ok or failed).",
    ["result"],
    registry=REGISTRY,
)
EXTRACTED = Counter(
    "companion_extracted_memories",
    "Candidate memories from extraction by outcome (added, updated, skipped).",
    ["outcome"],
    registry=REGISTRY,
)
OUTREACH = Counter(
    "companion_outreach",
    "Outbox rows (intended proactive messages, follow-ups folded into a check-in "
    "included) by kind, status (sent, skipped, failed, unknown, ...) and reason.",
    ["kind", "status", "reason"],
    registry=REGISTRY,
)
JOB_DURATION = Histogram(
    "companion_job_duration_seconds",
    "Background and scheduled jobs (patrol, diary, check-ins, sweep) by job.",
    ["job"],
    buckets=_JOB_BUCKETS,
    registry=REGISTRY,
)
PATROL_STEP_DURATION = Histogram(
    "companion_patrol_step_duration_seconds",
    "One nightly patrol run's time in each step (mechanical, extract, merge, promote, "
    "diary, purge), summed over its batches.",
    ["step"],
    buckets=_JOB_BUCKETS,
    registry=REGISTRY,
)
MEMORY_TOKENS = Histogram(
    "companion_memory_block_tokens",
    "Estimated tokens of the memory block in each conversation prompt.",
    buckets=(0, 50, 100, 200, 400, 700, 1000, 1500, 2500, 4000),
    registry=REGISTRY,
)
MEMORY_CUT = Counter(
    "companion_memory_block_cut",
    "Conversation prompts whose memory block the budget cut (something at hand left out).",
    registry=REGISTRY,
)
RECALLED = Histogram(
    "companion_recalled_items",
    "Recalled items (memories and past messages) shown per conversation prompt, by how "
    "much recall the message needed (skip, continuation, usual, past).",
    ["need"],
    buckets=(0, 1, 2, 3, 5, 8, 12, 16),
    registry=REGISTRY,
)
DEGRADED_TURNS = Counter(
    "companion_degraded_turns",
    "Turns answered without (all of) their memory block, by reason (recall_timeout, "
    "recall_error, context_timeout, context_error).",
    ["reason"],
    registry=REGISTRY,
)
UNSURE_ITEMS = Counter(
    "companion_unsure_items",
    "Unsure memories by what became of them: asked about, confirmed, rejected.",
    ["outcome"],
    registry=REGISTRY,
)
UNSURE_OUTCOMES = frozenset({"asked", "confirmed", "rejected"})
COMPONENT_UP = Gauge(
    "companion_component_up",
    "1 when a component (database, adapters, scheduler) is healthy, else 0.",
    ["component"],
    registry=REGISTRY,
)


@dataclass(slots=True)
class _ModelTime:
    """Seconds spent in model requests during one turn."""

    seconds: float = 0.0


_turn_model_time: contextvars.ContextVar[_ModelTime | None] = contextvars.ContextVar(
    "companion_turn_model_time", default=None
)


def _never_raises(func: Callable[P, None]) -> Callable[P, None]:
    """Log (at DEBUG) instead of raising: recording must never break the caller."""

    @wraps(func)
    def safe(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            func(*args, **kwargs)
        except Exception as exc:
            log.debug("metrics.record_failed", metric=func.__name__, error=type(exc).__name__)

    return safe


def _label(value: object) -> str:
    """A bounded label value; empty becomes 'none'."""
    text = str(value).strip() if value is not None else ""
    return text[:MAX_LABEL_CHARS] or "none"


def new_request_id() -> str:
    """A short random id for one turn, button press or job (8 hex characters)."""
    return secrets.token_hex(4)


@_never_raises
def record_message(platform: str, kind: str) -> None:
    """Count one message (kind: message, command or button) from a person."""
    MESSAGES.labels(_label(platform), _label(kind)).inc()


@_never_raises
def record_turn(kind: str, seconds: float, model_seconds: float = 0.0) -> None:
    """Observe one turn's duration and its part outside the model."""
    REPLY_LATENCY.labels(_label(kind)).observe(max(seconds, 0.0))
    TURN_OVERHEAD.labels(_label(kind)).observe(max(seconds - model_seconds, 0.0))


@contextmanager
def observe_turn(platform: str, kind: str, *, count: bool = True) -> Iterator[str]:
    """Time one turn (and count it, unless the conversation counts its messages as it
    stores them) and bind a request id to its log lines; yields the id."""
    if count:
        record_message(platform, kind)
    request_id = new_request_id()
    model_time = _ModelTime()
    token = _turn_model_time.set(model_time)
    started = time.perf_counter()
    try:
        with structlog.contextvars.bound_contextvars(request_id=request_id):
            yield request_id
    finally:
        _turn_model_time.reset(token)
        record_turn(kind, time.perf_counter() - started, model_time.seconds)


@_never_raises
def record_llm_call(model: str, seconds: float, usage: Usage) -> None:
    """Observe one successful model request: latency and tokens by kind."""
    name = _label(model)
    LLM_LATENCY.labels(name).observe(max(seconds, 0.0))
    for kind, count in (
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("cache_read", usage.cache_read_tokens),
        ("cache_write", usage.cache_write_tokens),
    ):
        LLM_TOKENS.labels(name, kind).inc(max(count, 0))
    model_time = _turn_model_time.get()
    if model_time is not None:
        model_time.seconds += seconds


@_never_raises
def record_llm_failure(model: str, reason: object) -> None:
    """Count a model request given up on (reason: HTTP status or error type)."""
    LLM_FAILURES.labels(_label(model), _label(reason)).inc()


@_never_raises
def record_extraction(outcome: ExtractionOutcome) -> None:
    """Count one extraction run and what became of its candidates."""
    EXTRACTIONS.labels("failed" if outcome.failed else "ok").inc()
    for name, count in (
        ("added", outcome.added),
        ("updated", outcome.updated),
        ("skipped", outcome.skipped),
    ):
        EXTRACTED.labels(name).inc(max(count, 0))


@_never_raises
def record_outreach(kind: str, status: str, reason: str | None = None, count: int = 1) -> None:
    """Count `count` outbox rows' fate, e.g. ('checkin', 'skipped', 'quiet_hours')."""
    OUTREACH.labels(_label(kind), _label(status), _label(reason)).inc(max(count, 0))


@_never_raises
def record_job(job: str, seconds: float) -> None:
    """Observe how long one run of a job took, e.g. ('patrol', 12.3)."""
    JOB_DURATION.labels(_label(job)).observe(max(seconds, 0.0))


@_never_raises
def record_patrol_step(step: str, seconds: float) -> None:
    """Observe one patrol run's time in one step, e.g. ('merge', 3.2)."""
    PATROL_STEP_DURATION.labels(_label(step)).observe(max(seconds, 0.0))


@contextmanager
def observe_job(job: str) -> Iterator[str]:
    """Time one run of a job (failed runs too) and bind a request id; yields the id."""
    request_id = new_request_id()
    started = time.perf_counter()
    try:
        with structlog.contextvars.bound_contextvars(request_id=request_id, job=job):
            yield request_id
    finally:
        record_job(job, time.perf_counter() - started)


@_never_raises
def record_memory_block(use: MemoryUse, *, need: str) -> None:
    """Observe one conversation prompt's memory block: its tokens, whether the budget cut
    it, how many recalled items it shows (by the recall `need`), and a degraded turn."""
    MEMORY_TOKENS.observe(max(use.tokens, 0))
    if use.cut:
        MEMORY_CUT.inc()
    RECALLED.labels(_label(need)).observe(max(use.recalled, 0))
    if use.degraded:
        record_degraded(use.degraded)


@_never_raises
def record_degraded(reason: str) -> None:
    """Count a turn answered without (all of) its memory block, e.g. 'recall_timeout'."""
    DEGRADED_TURNS.labels(_label(reason)).inc()


@_never_raises
def record_unsure(outcome: str) -> None:
    """Count what became of an unsure memory: 'asked' when the daily question about it
    goes out, 'confirmed' when an unsure item is affirmed (✓, the tool, the panel),
    'rejected' when one is forgotten (✗, the panel). `companion stats` reads the same
    outcomes from the memory events the life cycle records (`memory.store.memory_stats`)."""
    if outcome not in UNSURE_OUTCOMES:
        raise ValueError(f"unknown unsure outcome {outcome!r}")
    UNSURE_ITEMS.labels(outcome).inc()


@_never_raises
def record_component(component: str, up: bool) -> None:
    """Set a component's health gauge."""
    COMPONENT_UP.labels(_label(component)).set(1 if up else 0)


def exposition() -> bytes:
    """Every metric in the Prometheus text format (version 0.0.4, `CONTENT_TYPE`)."""
    return generate_latest(REGISTRY)
