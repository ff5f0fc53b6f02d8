"""The token estimate every budget is counted in (the context, the transcript, the turn)."""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """A cheap, conservative token estimate (about three characters a token, rounded up)."""
    return len(text) // 3 + 1
