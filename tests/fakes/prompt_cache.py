"""The prompt cache of Anthropic's Messages API, under the rules the real API enforces.

- The prompt is read in cache order: tools, then system blocks, then each message's
  content blocks (a string content is one text block).
- Only a block marked with `cache_control` (a breakpoint) writes an entry: the prefix up
  to and including it, keyed by the model and the exact blocks (minus `cache_control`);
  a different `tool_choice` makes the message blocks differ (not tools or system).
- A prefix shorter than the model's minimum is neither written nor read (no error, as
  the API does): 1,024 tokens for Sonnet 4.5 and older Sonnets and Opuses, 4,096 for
  Haiku 4.5 and Opus 4.5, 2,048 for the Haiku 3 models.
- A read looks for a live entry at each breakpoint and, failing that, at the block
  boundaries up to 20 blocks before it (the documented lookback); the longest hit wins.
- An entry lives 5 minutes (1 hour with `"ttl": "1h"`) and each hit refreshes it.
- Usage as the API reports it: `cache_read_input_tokens` is the prefix read,
  `cache_creation_input_tokens` what was written past it, and `input_tokens` only the
  rest (after the last breakpoint written or read) — the three add up to the prompt.

Tokens are estimated deterministically: a text block is `ceil(len(text) / 4)` tokens;
any other block (a tool, a tool_use, a tool_result) is that of its JSON. The clock is
`time.monotonic` plus what a test or bench adds with `advance`.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
DEFAULT_MINIMUM_TOKENS = 1024
MINIMUM_TOKENS = (
    ("claude-haiku-4-5", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)


def minimum_tokens(model: str) -> int:
    """The shortest prefix the model caches."""
    return next(
        (n for prefix, n in MINIMUM_TOKENS if model.startswith(prefix)), DEFAULT_MINIMUM_TOKENS
    )


def prompt_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Tools, system blocks and message blocks in cache order; strings as text blocks."""
    blocks: list[dict[str, Any]] = list(body.get("tools") or [])
    blocks.extend(_as_blocks(body.get("system")))
    for message in body["messages"]:
        blocks.extend(_as_blocks(message["content"]))
    return blocks


def block_tokens(block: dict[str, Any]) -> int:
    """The fake's token count of one block."""
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return math.ceil(len(block["text"]) / 4)
    return math.ceil(len(_canonical(block)) / 4)


def is_breakpoint(block: dict[str, Any]) -> bool:
    """Whether the block carries `cache_control`."""
    return block.get("cache_control") is not None


def ttl_of(block: dict[str, Any]) -> str:
    """The breakpoint's TTL name ('5m' unless '1h' was asked for)."""
    control = block.get("cache_control")
    return str(control.get("ttl", "5m")) if isinstance(control, dict) else "5m"


@dataclass
class CacheUsage:
    """One request's input tokens, split as the API reports them."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    created_1h: int = 0

    def as_json(self) -> dict[str, Any]:
        """The `usage` fields about input (output tokens are added by the caller)."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_input_tokens - self.created_1h,
                "ephemeral_1h_input_tokens": self.created_1h,
            },
        }


class PromptCache:
    """Cache entries by exact prefix, with expiry on a clock tests can move."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._offset = 0.0
        self._entries: dict[str, tuple[float, float]] = {}  # key -> (expires, ttl)

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass for the cache (entries expire)."""
        self._offset += seconds

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def usage(self, body: dict[str, Any]) -> CacheUsage:
        """Read and write the cache for this request; its input token split."""
        now = self._clock() + self._offset
        blocks = prompt_blocks(body)
        keys = _prefix_keys(body, blocks)
        ends = _running_totals([block_tokens(b) for b in blocks])
        marks = [i for i, block in enumerate(blocks) if is_breakpoint(block)]
        read_end = self._read(keys, marks, now)
        read = ends[read_end - 1] if read_end else 0
        written, written_1h = read, read
        for index in marks:
            if ends[index] < minimum_tokens(str(body["model"])) or index < read_end:
                continue
            ttl = TTL_SECONDS.get(ttl_of(blocks[index]), TTL_SECONDS["5m"])
            self._entries[keys[index]] = (now + ttl, ttl)
            if ttl > TTL_SECONDS["5m"]:
                written_1h = ends[index]
            written = ends[index]
        total = ends[-1] if ends else 0
        return CacheUsage(
            input_tokens=total - written,
            cache_creation_input_tokens=written - read,
            cache_read_input_tokens=read,
            created_1h=written_1h - read,
        )

    def _read(self, keys: list[str], marks: list[int], now: float) -> int:
        """How many blocks the longest live cached prefix covers (0 for a miss)."""
        best = 0
        for index in marks:
            for candidate in range(index, max(-1, index - LOOKBACK_BLOCKS - 1), -1):
                entry = self._entries.get(keys[candidate])
                if entry is None or entry[0] <= now:
                    continue
                self._entries[keys[candidate]] = (now + entry[1], entry[1])
                best = max(best, candidate + 1)
                break
        return best


def _prefix_keys(body: dict[str, Any], blocks: list[dict[str, Any]]) -> list[str]:
    """For each block, the key of the prefix ending with it. A change of `tool_choice`
    invalidates the message blocks (not the tools or the system), as the docs say."""
    digest = hashlib.sha256(str(body["model"]).encode())
    head = len(body.get("tools") or []) + len(_as_blocks(body.get("system")))
    keys = []
    for index, block in enumerate(blocks):
        if index == head:
            digest.update(b"\0tool_choice" + json.dumps(body.get("tool_choice")).encode())
        digest.update(b"\0" + _canonical(block).encode())
        keys.append(digest.copy().hexdigest())
    return keys


def _running_totals(values: list[int]) -> list[int]:
    totals, running = [], 0
    for value in values:
        running += value
        totals.append(running)
    return totals


def _canonical(block: dict[str, Any]) -> str:
    return json.dumps(
        {k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True, ensure_ascii=False
    )


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)
