"""Logging: structlog configured once — console in a terminal, JSON otherwise.

Person and platform ids are bound through contextvars (`bind_person`). Message and
memory text, and anything that looks like a token, never reach a log at INFO or above.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import structlog

SENSITIVE_KEYS = frozenset(
    {"text", "content", "message", "prompt", "reply", "memory", "summary", "token", "api_key"}
)
_TOKEN_PATTERN = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]+|\d{6,12}:[A-Za-z0-9_\-]{30,}|bot\d+:[A-Za-z0-9_\-]+"
    r"|[A-Za-z0-9_\-]{24}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,})"
)
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}


def redact(_logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Drop personal text at INFO and above; mask anything shaped like a secret."""
    if _LEVELS.get(method, 20) >= logging.INFO:
        for key in SENSITIVE_KEYS & event.keys():
            event[key] = "[redacted]"
    for key, value in event.items():
        if isinstance(value, str) and key != "event":
            event[key] = _TOKEN_PATTERN.sub("[secret]", value)
    return event


def configure_logging(level: str = "INFO", fmt: str = "auto") -> None:
    """Configure structlog and the standard library's logging once."""
    json_output = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_output
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    numeric = logging.getLevelName(level)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)
    for noisy in ("httpx", "httpcore", "telegram", "discord", "apscheduler", "aiohttp"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))


@contextmanager
def bind_person(*, user_id: int | None = None, platform: str | None = None) -> Iterator[None]:
    """Bind the person and platform to every log line inside the block."""
    values = {k: v for k, v in {"user_id": user_id, "platform": platform}.items() if v}
    with structlog.contextvars.bound_contextvars(**values):
        yield
