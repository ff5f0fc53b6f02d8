"""Importing chat history: how fast, and in how much memory.

A Telegram Desktop export of two people is written to disk (generated line by line, never
held whole), then imported into the embedded PostgreSQL through the real reader, store and
extraction (the real embedder; a fast fake model that notes one fact per window). Peak
Python memory of reading and storing is traced at two file sizes to show it does not grow
with the file. Run: `python -m bench.import [MESSAGES]` (default 50,000).
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.imports import ImportConfig, read_export, run_batch
from bot.llm import Completion, LLMRequest, ToolCall, Usage
from memory.store.imports import ImportView, start_import
from memory.store.records import Person

MESSAGES = 50_000
SMALL = 10_000
SELF_ID = "user4242"
_PERSON = re.compile(r'<message id="(\d+)" from="person"')


class FastLLM:
    """A model that answers at once: one fact per extraction window, from a message of
    the person's in it (so reconcile and storage do their real work)."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: LLMRequest) -> Completion:
        """Answer a forced tool call (extraction, judge) or a chat turn at once."""
        self.calls += 1
        tool_input: dict[str, Any] = {"memories": [], "verdicts": []}
        found = _PERSON.findall(request.turns[0].content) if request.turns else []
        if request.force_tool == "record_memories" and found:
            tool_input = {
                "memories": [
                    {
                        "content": f"The person keeps a log entry numbered {found[0]}",
                        "category": "fact",
                        "tier": "core",
                        "importance": 5,
                        "confidence": 0.9,
                        "evidence_message_ids": [int(found[0])],
                    }
                ]
            }
        if request.force_tool is not None:
            call = ToolCall(id="c1", name=request.force_tool, input=tool_input)
            return Completion(text="", model="fast", usage=Usage(1, 1), tool_calls=(call,))
        return Completion(text="ok", model="fast", usage=Usage(1, 1))


def write_export(path: Path, count: int) -> None:
    """A single-chat Telegram export with `count` messages, written as a stream."""
    start = datetime(2022, 1, 1, 9, 0, tzinfo=UTC)
    with path.open("w", encoding="utf-8") as out:
        out.write('{"name": "Robin", "type": "personal_chat", "id": 77, "messages": [\n')
        for i in range(count):
            mine = i % 2 == 0
            sent = start + timedelta(minutes=7 * i)
            message = {
                "id": i + 1,
                "type": "message",
                "date": sent.strftime("%Y-%m-%dT%H:%M:%S"),
                "date_unixtime": str(int(sent.timestamp())),
                "from": "Me" if mine else "Robin",
                "from_id": SELF_ID if mine else "user77",
                "text": f"Message {i}: today I walked {i % 13} km and cooked soup number {i}.",
                "text_entities": [],
            }
            out.write(("," if i else "") + json.dumps(message) + "\n")
        out.write("]}\n")


async def _person(core: Core, name: str) -> Person:
    return await core.store.ensure_person(
        platform="bench", platform_user_id=name, chat_id=name, display_name=name
    )


async def store(core: Core, path: Path, who: str) -> tuple[ImportView, float]:
    """Read and store one export; the view and the seconds it took."""
    person = await _person(core, who)
    started = time.perf_counter()
    view = await read_export(
        path,
        person=person,
        self_ids={SELF_ID},
        sessions=core.sessions,
        clock=core.clock,
        config=ImportConfig(max_bytes=1_000_000_000),
    )
    return view, time.perf_counter() - started


async def traced_peak(core: Core, path: Path, who: str) -> float:
    """Peak traced Python memory (MB) of reading and storing one export."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        await store(core, path, who)
        return tracemalloc.get_traced_memory()[1] / 1_000_000
    finally:
        tracemalloc.stop()


async def extract_all(core: Core, view: ImportView) -> tuple[float, int]:
    """Run the background batches to the end; seconds and batches."""
    assert core.importer is not None
    await start_import(core.sessions, user_id=view.user_id, import_id=view.id, now=core.clock.now())
    current: ImportView | None = view
    batches = 0
    started = time.perf_counter()
    while current is not None and current.status != "done":
        current = await run_batch(core.importer.extracting, current, timezone="UTC")
        batches += 1
    return time.perf_counter() - started, batches


async def measure(count: int) -> dict[str, float]:
    """Every figure of the report."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        small, large = root / "small.json", root / "large.json"
        write_export(small, min(SMALL, count))
        write_export(large, count)
        llm = FastLLM()
        settings = Settings(data_dir=root / "data", log_level="WARNING")
        core = await build_core(settings, llm=llm)
        try:
            peak_small = await traced_peak(core, small, "traced-small")
            peak_large = await traced_peak(core, large, "traced-large")
            view, store_seconds = await store(core, large, "timed")
            extract_seconds, batches = await extract_all(core, view)
        finally:
            await core.aclose()
        return {
            "messages": view.message_count,
            "file_mb": large.stat().st_size / 1_000_000,
            "small_mb": small.stat().st_size / 1_000_000,
            "store_seconds": store_seconds,
            "extract_seconds": extract_seconds,
            "batches": batches,
            "model_calls": llm.calls,
            "peak_small": peak_small,
            "peak_large": peak_large,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }


def main() -> None:
    """Print the report."""
    from bot.logs import configure_logging

    configure_logging("WARNING", "console")
    count = int(sys.argv[1]) if len(sys.argv) > 1 else MESSAGES
    f = asyncio.run(measure(count))
    total = f["store_seconds"] + f["extract_seconds"]
    rate = f["messages"] / total
    print(f"import of {f['messages']:,.0f} messages ({f['file_mb']:.1f} MB Telegram export)")
    print(f"  read and store: {f['store_seconds']:.1f} s")
    print(
        f"  extraction: {f['extract_seconds']:.1f} s in {f['batches']:.0f} batches, "
        f"{f['model_calls']:.0f} fast-model calls (a fake model that answers at once)"
    )
    print(
        f"  peak traced memory of read+store: {f['peak_small']:.1f} MB at a "
        f"{f['small_mb']:.1f} MB file, {f['peak_large']:.1f} MB at a {f['file_mb']:.1f} MB "
        f"file; max RSS {f['rss_mb']:.0f} MB"
    )
    print(f"figure import_messages_per_second {rate:.0f} msg/s")
    print(f"figure import_store_messages_per_second {f['messages'] / f['store_seconds']:.0f} msg/s")
    print(f"figure import_peak_mb_small_file {f['peak_small']:.1f} MB")
    print(f"figure import_peak_mb_large_file {f['peak_large']:.1f} MB")


if __name__ == "__main__":
    main()
