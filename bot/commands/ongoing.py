"""The "Ongoing" group of `/memory`: the person's live threads (ongoing situations, like
"Moving to Aarhus"), each with its latest item, so what the companion files under a
situation is visible too."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.commands.base import CommandDeps
from memory.store.thread_views import Ongoing, ongoing_threads

ONGOING = "🧵 Ongoing"
MAX_THREADS = 10


def describe_thread(thread: Ongoing, zone: ZoneInfo) -> str:
    """'Moving to Aarhus (3 items, last 24 Nov) — latest: m7 · The person bought a bike'."""
    count = "1 item" if thread.items == 1 else f"{thread.items} items"
    seen = thread.last_seen_at.astimezone(zone)
    return (
        f"{thread.title} ({count}, last {seen:%-d %b}) — latest: "
        f"{thread.latest_label} · {thread.latest}"
    )


async def ongoing_group(deps: CommandDeps, user_id: int, zone: ZoneInfo) -> str:
    """The group's heading and lines ('' when the person has no ongoing thread)."""
    threads = await ongoing_threads(
        deps.sessions, user_id=user_id, now=deps.clock.now(), limit=MAX_THREADS
    )
    if not threads:
        return ""
    return "\n".join([ONGOING, *(describe_thread(t, zone) for t in threads)])
