"""Opportunistic batching of embedding calls (`memory.recall.batching`): calls that wait
while a run is going share the next run; a lone call is never held back."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from memory.recall.batching import Batcher
from memory.recall.minilm import MiniLMEmbedder
from memory.store.ports import Vector


class Recorded:
    """A blocking `run` that records its batches; the first run waits for `release`."""

    def __init__(self, hold_first: bool = True, fail_on: str | None = None) -> None:
        self.runs: list[list[str]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()
        self.fail_on = fail_on

    def __call__(self, texts: list[str]) -> Vector:
        self.runs.append(list(texts))
        self.started.set()
        self.release.wait(5)
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError("the model broke")
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


async def _started(run: Recorded) -> None:
    assert await asyncio.to_thread(run.started.wait, 5)


async def test_calls_that_wait_share_the_next_run_and_each_gets_its_own_rows() -> None:
    run = Recorded()
    batcher = Batcher(run, most=8)
    first = asyncio.ensure_future(batcher.embed(["a"]))
    await _started(run)
    waiting = [asyncio.ensure_future(batcher.embed(texts)) for texts in (["bb"], ["ccc", "d"])]
    await asyncio.sleep(0)
    run.release.set()
    rows = await asyncio.gather(first, *waiting)
    assert run.runs == [["a"], ["bb", "ccc", "d"]]
    assert [r[:, 0].tolist() for r in rows] == [[1.0], [2.0], [3.0, 1.0]]


async def test_a_lone_call_runs_at_once() -> None:
    run = Recorded(hold_first=False)
    batcher = Batcher(run, most=8)
    rows = await asyncio.wait_for(batcher.embed(["hello"]), 5)
    assert run.runs == [["hello"]]
    assert rows.shape == (1, 2)


async def test_a_run_holds_at_most_the_limit_and_a_bigger_call_runs_alone() -> None:
    run = Recorded()
    batcher = Batcher(run, most=3)
    first = asyncio.ensure_future(batcher.embed(["x"]))
    await _started(run)
    calls = [["a", "b"], ["c", "d"], ["e", "f", "g", "h"], ["i"]]
    waiting = [asyncio.ensure_future(batcher.embed(texts)) for texts in calls]
    await asyncio.sleep(0)
    run.release.set()
    await asyncio.gather(first, *waiting)
    assert run.runs == [["x"], ["a", "b"], ["c", "d"], ["e", "f", "g", "h"], ["i"]]


async def test_an_error_reaches_every_call_of_its_run_and_the_next_run_still_works() -> None:
    run = Recorded(fail_on="bad")
    batcher = Batcher(run, most=8)
    first = asyncio.ensure_future(batcher.embed(["x"]))
    await _started(run)
    together = [asyncio.ensure_future(batcher.embed(t)) for t in (["bad"], ["fine"])]
    await asyncio.sleep(0)
    run.release.set()
    assert (await first).shape == (1, 2)
    for call in together:
        with pytest.raises(RuntimeError, match="the model broke"):
            await call
    assert (await batcher.embed(["later"]))[0, 0] == 5.0


async def test_a_caller_that_gave_up_while_waiting_costs_no_run() -> None:
    run = Recorded()
    batcher = Batcher(run, most=8)
    first = asyncio.ensure_future(batcher.embed(["x"]))
    await _started(run)
    gone = asyncio.ensure_future(batcher.embed(["gone"]))
    kept = asyncio.ensure_future(batcher.embed(["kept"]))
    await asyncio.sleep(0)
    gone.cancel()
    run.release.set()
    await asyncio.gather(first, kept)
    assert run.runs == [["x"], ["kept"]]


def test_the_batcher_serves_one_event_loop_after_another() -> None:
    run = Recorded(hold_first=False)
    batcher = Batcher(run, most=8)
    for text in ("one", "three"):  # each its own loop, leaving the thread's current loop be
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            rows = runner.run(batcher.embed([text]))
        assert rows[0, 0] == len(text)


async def test_minilm_calls_made_together_get_the_vectors_they_get_alone() -> None:
    embedder = MiniLMEmbedder()
    texts = ["I moved to Lisbon in May", "my sister adopted a puppy", "exam next Friday", "ok"]
    alone = np.vstack([embedder.embed_sync([t]) for t in texts])
    together = await asyncio.gather(*(embedder.embed([t]) for t in texts))
    assert np.allclose(np.vstack(together), alone, atol=1e-4)


class HeldMiniLM(MiniLMEmbedder):
    """MiniLM whose runs of the text 'hold' wait for `release`; runs are recorded."""

    def __init__(self) -> None:
        self.runs: list[int] = []
        self.holding = threading.Event()
        self.release = threading.Event()
        super().__init__()

    def embed_sync(self, texts: list[str]) -> Vector:
        self.runs.append(len(texts))
        if "hold" in texts:
            self.holding.set()
            self.release.wait(5)
        return np.zeros((len(texts), 384), dtype=np.float32)


async def test_a_bulk_call_never_waits_behind_a_turn_and_no_turn_behind_it() -> None:
    embedder = HeldMiniLM()
    turn = asyncio.ensure_future(embedder.embed(["hold"]))
    assert await asyncio.to_thread(embedder.holding.wait, 5)
    bulk = await asyncio.wait_for(embedder.embed([f"line {i}" for i in range(40)]), 5)
    assert bulk.shape == (40, 384) and not turn.done()
    embedder.release.set()
    await turn
    assert embedder.runs == [1, 40]
