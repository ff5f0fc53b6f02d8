"""Bringing an old chat in: read an export (streamed, off the event loop), store it as a
pending import, say what it holds and what learning from it would cost, then extract
from it in the background a batch at a time, and undo it whole on request.

The parsing is in `bot.chat_exports`; every statement in `memory.store.imports`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

from bot.chat_exports import SELF_IN_TEXT, ExportReader, ExportRejected
from bot.export_formats import CHATGPT_SELF, ExportedMessage
from memory.care.repository import SqlMemoryRepository
from memory.learning.extraction import MAX_MESSAGES, extract_session
from memory.local_time import zone_of
from memory.store.database import Database
from memory.store.imports import (
    ImportLine,
    ImportView,
    UndoneImport,
    choose_self,
    next_session,
    record_progress,
    running_imports,
    store_import,
    undo_import,
)
from memory.store.ports import Clock, Embedder, ToolCaller
from memory.store.records import Person

log = structlog.get_logger(__name__)

CHUNK = 1000  # messages read off the loop and inserted at a time
PROMPT_TOKENS = 2500  # rules, remembered memories and threads around each window
ANSWER_TOKENS = 400
CHARS_PER_TOKEN = 4

ProgressSink = Callable[[ImportView], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ImportConfig:
    """Knobs of importing: the size cap and the prices the cost estimate uses."""

    max_bytes: int = 50_000_000
    input_price_per_mtok: float = 1.0
    output_price_per_mtok: float = 5.0


@dataclass(frozen=True, slots=True)
class Estimate:
    """What extracting an import would take: model calls, tokens and dollars."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


def estimate(view: ImportView, config: ImportConfig) -> Estimate:
    """Calls: one per window of `MAX_MESSAGES` in each session (a judge call may follow
    some); tokens: the text itself plus the prompt around each window."""
    calls = max(view.sessions, 1) + view.message_count // MAX_MESSAGES
    input_tokens = view.chars // CHARS_PER_TOKEN + calls * PROMPT_TOKENS
    output_tokens = calls * ANSWER_TOKENS
    cost = (
        input_tokens * config.input_price_per_mtok + output_tokens * config.output_price_per_mtok
    ) / 1_000_000
    return Estimate(calls, input_tokens, output_tokens, cost)


async def read_export(
    path: Path,
    *,
    person: Person,
    self_ids: Collection[str],
    sessions: Database,
    clock: Clock,
    config: ImportConfig,
    progress: Callable[[int], None] | None = None,
) -> ImportView:
    """Store the export at `path` as a pending import of `person`'s and return what it
    holds; whose words are the person's is settled when the export says so (a ChatGPT
    or text file, or an author id in `self_ids`). `ExportRejected` stores nothing."""
    now = clock.now()
    reader = ExportReader(path, max_bytes=config.max_bytes, zone=zone_of(person.timezone))
    found: dict[str, str] = {}
    messages = reader.messages()

    async def chunks() -> AsyncIterator[list[ImportLine]]:
        last, total = now, 0
        try:
            while chunk := await asyncio.to_thread(_take, messages, CHUNK):
                lines = []
                for message in chunk:
                    last = message.sent_at or last
                    if message.author_id is not None and message.author_id in self_ids:
                        found.setdefault("self", message.author)
                    lines.append(
                        ImportLine(message.author, message.text, last, message.conversation)
                    )
                total += len(lines)
                if progress is not None:
                    progress(total)
                yield lines
        finally:
            messages.close()  # the file, also when storing failed half-way
        if total == 0:
            raise ExportRejected("empty")

    view = await store_import(
        sessions,
        user_id=person.id,
        source_of=lambda: reader.info.source,
        chunks=chunks(),
        now=now,
    )
    own = _own_name(reader.info.source, found.get("self"))
    if own is not None and await choose_self(
        sessions, user_id=person.id, import_id=view.id, name=own
    ):
        view = _named(view, own)
    log.info(
        "import.stored",
        user_id=person.id,
        import_id=view.id,
        source=view.source,
        messages=view.message_count,
        sessions=view.sessions,
    )
    return view


def _take(messages: Iterator[ExportedMessage], count: int) -> list[ExportedMessage]:
    chunk = []
    for message in messages:
        chunk.append(message)
        if len(chunk) >= count:
            break
    return chunk


def _own_name(source: str, found: str | None) -> str | None:
    if source == "chatgpt":
        return CHATGPT_SELF
    if source == "text":
        return SELF_IN_TEXT
    return found


def _named(view: ImportView, name: str) -> ImportView:
    return replace(view, self_name=name)


@dataclass(frozen=True, slots=True)
class Extracting:
    """What a background extraction batch needs."""

    sessions: Database
    memories: SqlMemoryRepository
    llm: ToolCaller
    embedder: Embedder
    clock: Clock


async def run_batch(deps: Extracting, view: ImportView, *, timezone: str) -> ImportView | None:
    """Extract one window of the import's next unread session (its watermark is the
    resume point after a restart), then record how far it got; done when none is left."""
    session_id = await next_session(deps.sessions, user_id=view.user_id, import_id=view.id)
    if session_id is not None:
        await extract_session(
            user_id=view.user_id,
            session_id=session_id,
            sessions=deps.sessions,
            memories=deps.memories,
            llm=deps.llm,
            embedder=deps.embedder,
            clock=deps.clock,
            timezone=timezone,
            summarise=False,
        )
        session_id = await next_session(deps.sessions, user_id=view.user_id, import_id=view.id)
    return await record_progress(
        deps.sessions,
        user_id=view.user_id,
        import_id=view.id,
        now=deps.clock.now(),
        finished=session_id is None,
    )


async def run_imports(
    deps: Extracting,
    *,
    timezone_of: Callable[[int], Awaitable[str]],
    on_progress: ProgressSink | None = None,
) -> int:
    """One batch of every running import (the scheduler calls this at a gentle rate);
    how many batches ran. `on_progress` hears of an import whose percentage moved."""
    ran = 0
    for view in await running_imports(deps.sessions):
        try:
            updated = await run_batch(deps, view, timezone=await timezone_of(view.user_id))
        except Exception as exc:
            log.warning("import.batch_failed", import_id=view.id, error=type(exc).__name__)
            continue
        ran += 1
        moved = updated is not None and (
            percent(updated) != percent(view) or updated.status != view.status
        )
        if moved and updated is not None and on_progress is not None:
            await on_progress(updated)
    return ran


async def undo(sessions: Database, *, user_id: int, import_id: int) -> UndoneImport | None:
    """Remove an import, its messages and every memory it made, in one step."""
    done = await undo_import(sessions, user_id=user_id, import_id=import_id)
    if done is not None:
        log.info(
            "import.undone",
            user_id=user_id,
            import_id=import_id,
            messages=done.messages,
            memories=done.memories,
        )
    return done


def percent(view: ImportView) -> int:
    """How much of the import extraction has read, 0-100."""
    if view.message_count == 0 or view.status == "done":
        return 100
    return min(99, math.floor(100 * view.extracted_count / view.message_count))


def found_lines(view: ImportView, cost: Estimate, zone_name: str) -> list[str]:
    """What an export holds, in words for the person."""
    zone = zone_of(zone_name)
    span = "no dates in the file"
    if view.first_at is not None and view.last_at is not None and view.source != "text":
        first, last = view.first_at.astimezone(zone), view.last_at.astimezone(zone)
        span = f"{first:%-d %b %Y} – {last:%-d %b %Y}"
    people = ", ".join(f"{p.name} ({p.messages:,})" for p in view.participants[:8])
    more = len(view.participants) - 8
    return [
        f"I found {view.message_count:,} messages ({_SOURCES.get(view.source, view.source)}), "
        f"{span}.",
        f"Participants: {people}{f' and {more} more' if more > 0 else ''}.",
        f"Learning from it takes about {cost.calls:,} model calls "
        f"(~{cost.input_tokens + cost.output_tokens:,} tokens, about ${cost.cost_usd:.2f}), "
        "a few at a time in the background.",
    ]


_SOURCES = {
    "telegram": "a Telegram export",
    "chatgpt": "a ChatGPT export",
    "discord": "a Discord export",
    "text": "a text file",
}
