"""Logging: structlog configured once — console in a terminal, JSON otherwise.

Person and platform ids are bound through contextvars (`bind_person`). Message and
memory text, and anything that looks like a token, never reach a log at INFO or above:
not as a field, not inside a formatted exception (SQL parameters, PostgreSQL's DETAIL
lines, rejected query arguments and pydantic's rejected input carry personal data), and
not through the standard library's loggers either, whose records pass through the same
redaction. A library's record keeps its template and numbers only: every other argument
is replaced, since libraries log what they received (python-telegram-bot logs a whole
unreadable getUpdates batch, people's messages included, at CRITICAL).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

import structlog

SENSITIVE_KEYS = frozenset(
    {"text", "content", "message", "prompt", "reply", "memory", "summary", "token", "api_key"}
)
_TOKEN_PATTERN = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]+|\d{6,12}:[A-Za-z0-9_\-]{30,}|bot\d+:[A-Za-z0-9_\-]+"
    r"|[A-Za-z0-9_\-]{24}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,}|pa-[A-Za-z0-9_\-]{20,})"
)
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.\-]*://[^:/@\s]+:)[^@\s]+@")
_DATA_IN_ERRORS = (
    # SQLAlchemy's statement parameters (also hidden by the engine's hide_parameters).
    (re.compile(r"^\[parameters: .*$", re.M), "[parameters: [redacted]]"),
    # PostgreSQL's DETAIL quotes rows and keys ("Failing row contains (...)").
    (re.compile(r"DETAIL: .*$", re.M), "DETAIL: [redacted]"),
    # asyncpg quotes a query argument it could not encode.
    (re.compile(r"(query argument \$\d+: ).*$", re.M), r"\g<1>[redacted]"),
    # PostgreSQL quotes a value it could not parse ('invalid input syntax for type ...').
    (re.compile(r"(invalid input (?:syntax|value) for [^:\n]+: ).*$", re.M), r"\g<1>[redacted]"),
    # pydantic quotes the input it rejected (a model's answer holds memory text).
    (re.compile(r"(input_value=).*?(, input_type=|\]?$)", re.M), r"\g<1>[redacted]\g<2>"),
)
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}


def mask_secrets(text: str) -> str:
    """`text` with anything shaped like a token, an API key or a URL's password masked."""
    return _URL_PASSWORD.sub(r"\g<head>[secret]@", _TOKEN_PATTERN.sub("[secret]", text))


def scrub_error_text(text: str) -> str:
    """`text` (an error message or a formatted traceback) without the row data that
    database errors quote, and with secrets masked."""
    for pattern, replacement in _DATA_IN_ERRORS:
        text = pattern.sub(replacement, text)
    return mask_secrets(text)


def redact(_logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Drop personal text at INFO and above; mask anything shaped like a secret."""
    public = _LEVELS.get(method, 20) >= logging.INFO
    if public:
        for key in SENSITIVE_KEYS & event.keys():
            event[key] = "[redacted]"
    scrub = scrub_error_text if public else mask_secrets
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = scrub(value)
    return event


class LibraryArguments(logging.Filter):
    """Keep a standard-library record's template and numeric arguments; replace the rest
    (strings, dicts, objects: whatever a library received) with `[redacted]`."""

    TRUSTED = ("alembic",)  # revision ids and our own migrations' messages

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.args or record.name.startswith(self.TRUSTED):
            return True
        args = record.args
        if isinstance(args, Mapping):
            safe: Any = {key: _safe_argument(value) for key, value in args.items()}
        else:
            safe = tuple(_safe_argument(value) for value in args)
        try:
            record.msg = str(record.msg) % safe
        except (TypeError, ValueError, KeyError):
            record.msg = f"{record.msg} [arguments redacted]"
        record.args = None
        return True


def _safe_argument(value: object) -> object:
    return value if isinstance(value, int | float) or value is None else REDACTED


class _Redacted:
    """Stands for a library's log argument: '[redacted]' however it is formatted."""

    def __repr__(self) -> str:
        return "[redacted]"

    __str__ = __repr__


REDACTED = _Redacted()


def configure_logging(level: str = "INFO", fmt: str = "auto") -> None:
    """Configure structlog and the standard library's logging once; both end in the
    same redaction and renderer."""
    json_output = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_output
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    numeric = logging.getLevelName(level)
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp,
            structlog.processors.format_exc_info,
            redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(LibraryArguments())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.contextvars.merge_contextvars,
                structlog.stdlib.add_logger_name,
                structlog.processors.add_log_level,
                stamp,
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact,
                renderer,
            ],
        )
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), handlers=[handler], force=True)
    for noisy in ("httpx", "httpcore", "telegram", "discord", "apscheduler", "aiohttp"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))


@contextmanager
def bind_person(*, user_id: int | None = None, platform: str | None = None) -> Iterator[None]:
    """Bind the person and platform to every log line inside the block."""
    values = {k: v for k, v in {"user_id": user_id, "platform": platform}.items() if v}
    with structlog.contextvars.bound_contextvars(**values):
        yield
