"""What the embedder's batching saves: MiniLM on calls of one text each, made 1, 4 and 16
at once (a wave of replies), each way in turn: one worker thread per call (how calls ran
before) and `MiniLMEmbedder.embed`, where the calls that wait share a run
(`memory.recall.batching`). Wall and CPU time per text (CPU of the whole process, the
ONNX threads included).

    python -m bench.embedding_batches [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

from bench.retrieval_latency import said
from bot.logs import configure_logging
from memory.recall.minilm import MiniLMEmbedder

AT_ONCE = (1, 4, 16)
WAYS = ("thread per call", "batched")


async def wave(
    embedder: MiniLMEmbedder, way: str, texts: Sequence[str], at_once: int
) -> tuple[float, float]:
    """Milliseconds of wall and CPU time per text, embedding `texts` `at_once` at a time."""
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), at_once):
        group = texts[i : i + at_once]
        if way == "batched":
            await asyncio.gather(*(embedder.embed([t]) for t in group))
        else:
            await asyncio.gather(*(asyncio.to_thread(embedder.embed_sync, [t]) for t in group))
    count = len(texts)
    return (
        (time.perf_counter() - started) / count * 1000,
        (time.process_time() - cpu) / count * 1000,
    )


async def measure(rounds: int) -> dict[tuple[int, str], list[tuple[float, float]]]:
    """Every (at once, way), `rounds` times, alternating the ways so they share the
    machine's conditions; distinct texts throughout."""
    embedder = MiniLMEmbedder()
    embedder.embed_sync(["warm up"])
    lines = said(rounds * len(WAYS) * sum(AT_ONCE) * 4)
    taken: dict[tuple[int, str], list[tuple[float, float]]] = {}
    start = 0
    for at_once in AT_ONCE:
        for round_ in range(rounds):
            for way in WAYS if round_ % 2 else reversed(WAYS):
                texts = lines[start : start + at_once * 4]
                start += at_once * 4
                taken.setdefault((at_once, way), []).append(
                    await wave(embedder, way, texts, at_once)
                )
    return taken


def report(taken: dict[tuple[int, str], list[tuple[float, float]]]) -> str:
    """The table, then the figures for 16 calls at once."""
    lines = ["MiniLM, calls of one text each; medians of the rounds, per text"]
    for (at_once, way), values in taken.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        lines.append(f"  {at_once:2d} at once, {way:15s} wall {wall:5.2f} ms  cpu {cpu:5.2f} ms")
    cpu_of = {way: statistics.median(v[1] for v in taken[(AT_ONCE[-1], way)]) for way in WAYS}
    saved = 1 - cpu_of["batched"] / cpu_of["thread per call"]
    lines += [
        f"figure embed_cpu_per_text_16_at_once {cpu_of['batched']:.2f} ms",
        f"figure embed_cpu_per_text_16_at_once_thread_per_call {cpu_of['thread per call']:.2f} ms",
        f"figure embed_batching_cpu_saved {saved:.2f} ratio",
    ]
    return "\n".join(lines)


def main() -> None:
    """Print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(report(asyncio.run(measure(max(1, args.rounds)))))


if __name__ == "__main__":
    main()
