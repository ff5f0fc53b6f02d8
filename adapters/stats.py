"""`companion stats`: the operational figures from the database, as plain tables."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from bot.bootstrap import open_database
from bot.config import Settings
from memory.store.database import Database, session_factory
from memory.store.memory_stats import MemoryFigures
from memory.store.stats import Figures, Windowed, collect_figures

EXTRACTION_LABELS = {"create": "added", "supersede": "updated", "refresh": "refreshed"}


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns aligned: text to the left, numbers to the right."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [
        max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)
    ]
    numeric = [bool(rows) and all(_is_number(row[i]) for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in cells)])


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) or value is None


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _windowed(name: str, counts: Windowed) -> list[object]:
    return [name, counts.day, counts.total]


def render(figures: Figures) -> str:
    """Every section of the report, separated by blank lines."""
    empty = Windowed(0, 0)
    sections = [
        f"Companion at {figures.now:%Y-%m-%d %H:%M} UTC (24h = the last 24 hours)",
        table(
            ["who", "total", "active 24h", "active 7d"],
            [["people", figures.people, figures.active_day, figures.active_week]],
        ),
        table(
            ["messages", "24h", "total"],
            [
                _windowed("from people", figures.messages.get("user", empty)),
                _windowed("from companion", figures.messages.get("assistant", empty)),
            ],
        ),
        table(
            ["reply latency (24h)", "replies", "p50 s", "p95 s"],
            [
                [
                    "message to reply",
                    figures.latency.samples,
                    figures.latency.p50,
                    figures.latency.p95,
                ]
            ],
        ),
        _tokens(figures),
        table(
            ["extraction", "24h", "total"],
            [
                *(
                    _windowed(label, figures.extraction.get(action, empty))
                    for action, label in EXTRACTION_LABELS.items()
                ),
                ["sessions failing (retry pending)", None, figures.extraction_failing_sessions],
                ["failed attempts on those", None, figures.extraction_failed_attempts],
            ],
        ),
        table(
            ["outreach kind", "status", "reason", "24h", "total"],
            [[k, s, r or "-", w.day, w.total] for k, s, r, w in figures.outreach]
            or [["(none yet)", "", "", 0, 0]],
        ),
        table(
            ["memories tier", "status", "count"],
            [list(row) for row in figures.memories] or [["(none yet)", "", 0]],
        ),
    ]
    if figures.memory_use is not None:
        sections.append(_memory_use(figures.memory_use))
    return "\n\n".join(sections) + "\n"


def _memory_use(use: MemoryFigures) -> str:
    """The memory of conversation prompts: per prompt, means; otherwise counts."""
    rows: list[list[object]] = [
        ["prompts with memory", *use.prompts],
        ["memory tokens per prompt", use.tokens.day, use.tokens.total],
        ["recalled items per prompt", use.recalled.day, use.recalled.total],
        ["cut by the memory budget", *use.cut],
        ["degraded turns", sum(d for _, d, _ in use.degraded), sum(t for _, _, t in use.degraded)],
        *([f"  {reason}", d, t] for reason, d, t in use.degraded),
        *([f"unsure {outcome}", d, t] for outcome, d, t in use.unsure),
    ]
    return table(["memory in prompts", "24h", "total"], rows)


def _tokens(figures: Figures) -> str:
    rows: list[list[object]] = []
    for model in figures.tokens:
        for window in ("day", "total"):
            rows.append(
                [
                    model.model,
                    "24h" if window == "day" else "total",
                    getattr(model.input, window),
                    getattr(model.output, window),
                    getattr(model.cache_read, window),
                    getattr(model.cache_write, window),
                ]
            )
    headers = ["model (reply tokens)", "window", "input", "output", "cache read", "cache write"]
    return table(headers, rows or [["(none yet)", "", 0, 0, 0, 0]])


async def stats_report(sessions: Database, now: datetime) -> str:
    """The report at `now`, read from the database."""
    return render(await collect_figures(sessions, now))


async def print_stats(settings: Settings) -> None:
    """`companion stats`: open the database, print the report, close."""
    engine, embedded = await open_database(settings)
    try:
        print(await stats_report(session_factory(engine), datetime.now(UTC)), end="")
    finally:
        await engine.dispose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
