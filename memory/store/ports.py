"""What the memory layer needs from outside, as small Protocols.

`bot` provides the implementations (the system clock, an LLM that can call tools or write
plain text); `memory` never imports `bot`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


class Clock(Protocol):
    """The current time, always timezone-aware UTC."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        """Now, in UTC."""
        return datetime.now(UTC)


class EmbeddingError(RuntimeError):
    """The embedding provider could not embed the texts (every `Embedder` raises this, or
    a subclass, when it fails)."""


class Embedder(Protocol):
    """Turns texts into unit-length vectors of a fixed dimension; raises `EmbeddingError`."""

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str: ...

    async def embed(self, texts: list[str]) -> Vector:
        """One row per text, L2-normalised, shape (len(texts), dim)."""
        ...


class ToolCaller(Protocol):
    """A fast language model answering through one forced tool call.

    Raises an exception (any) when it cannot answer; callers treat that as
    "try again later". Raises `memory.store.errors.AnswerTruncated` when the answer stopped at
    its token limit; `max_tokens` (None: the caller's default) sets that limit.
    """

    async def call_tool(
        self,
        *,
        system: str,
        prompt: str,
        tool_name: str,
        tool_description: str,
        input_schema: dict[str, Any],
        max_tokens: int | None = None,
    ) -> dict[str, Any]: ...


class TextWriter(Protocol):
    """A fast language model answering in plain text (no tool)."""

    async def write(self, *, system: str, prompt: str) -> str:
        """The model's answer to `prompt` under `system`."""
        ...
