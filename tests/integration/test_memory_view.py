"""`/memory` through the core on real PostgreSQL: active items under their headings with
their dates and when they fade, in the person's timezone; the trash a page at a time;
search text that had to be cut says so."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.bootstrap import Core
from memory.store.items import Candidate
from tests.conftest import FakeClock
from tests.support.catalog import user_id_of
from tests.support.commands import labels, press, remember, run

MARCH = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday


def on(day: int, hour: int = 12, minute: int = 0) -> datetime:
    """A moment in March 2026, UTC."""
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


async def add(core: Core, user_id: int, content: str, category: str, **when: datetime) -> int:
    """A memory as extraction would store it; returns its short id."""
    tier = "active" if category in {"thread", "goal", "emotion", "event"} else "core"
    candidate = Candidate(content, category, tier, 6, 0.9, **when)  # type: ignore[arg-type]
    item = await core.memories.add(user_id, candidate, source="extracted", actor="extraction")
    return item.short_id


async def test_active_items_show_their_dates_and_when_they_fade(
    core: Core, clock: FakeClock
) -> None:
    clock.current = MARCH
    await run(core, "/timezone Copenhagen")
    alice = await user_id_of(core.sessions, "alice")
    await add(core, alice, "Job interview at Acme", "event", event_at=on(6, 13), expires_at=on(9))
    # 23:30 UTC on the 4th is already the 5th in Copenhagen
    await add(core, alice, "Flight to Tokyo", "event", event_at=on(4, 23, 30), expires_at=on(8))
    await add(core, alice, "Looking for a new flat", "thread", expires_at=on(30))
    await add(core, alice, "Training for a half marathon", "goal", expires_at=on(31))
    await add(core, alice, "Works as a nurse", "fact")
    await run(core, "/pin m4")

    shown = (await run(core, "/memory")).text
    assert shown.splitlines() == [
        "What I remember about you (5 items, page 1 of 1):",
        "📌 Pinned",
        "m4 · Training for a half marathon · I noticed, 2 Mar (90% sure)",  # pinned: never fades
        "",
        "About you",
        "m5 · Works as a nurse · I noticed, 2 Mar (90% sure)",
        "",
        "Coming up and recent",
        "m2 · Flight to Tokyo — Thu 5 Mar · fades 8 Mar · I noticed, 2 Mar (90% sure)",
        "m1 · Job interview at Acme — Fri 6 Mar · fades 9 Mar · I noticed, 2 Mar (90% sure)",
        "",
        "Going on now",
        "m3 · Looking for a new flat · fades 30 Mar · I noticed, 2 Mar (90% sure)",
    ]
    active = (await run(core, "/memory active")).text
    assert "4 items" in active and "nurse" not in active
    assert (await run(core, "/memory m2")).text == (
        "m2 · Flight to Tokyo — Thu 5 Mar · fades 8 Mar · I noticed, 2 Mar (90% sure)"
    )
    await run(core, "/timezone UTC")
    assert "Flight to Tokyo — Wed 4 Mar" in (await run(core, "/memory m2")).text


async def test_the_trash_pages_past_twenty_items(core: Core) -> None:
    await remember(core, *(f"trashed fact number {i}" for i in range(1, 24)))
    for i in range(1, 24):
        assert "Forgotten" in (await run(core, f"/forget m{i}")).text
    first = await run(core, "/memory trash")
    assert "23 items, page 1 of 3" in first.text
    assert [line.split(" · ")[0] for line in first.text.splitlines()[1:]] == [
        f"m{i}" for i in range(23, 13, -1)
    ]  # the latest forgotten first
    assert labels(first)[-1] == "Next ▶" and len(labels(first)) == 11
    second = await press(core, first, "Next")
    assert "page 2 of 3" in second.text and labels(second)[-2:] == ["◀ Previous", "Next ▶"]
    assert "page 1 of 3" in (await press(core, second, "◀ Previous")).text
    last = await run(core, "/memory trash 3")
    assert "page 3 of 3" in last.text and labels(last)[-1] == "◀ Previous"
    assert "m1 · trashed fact number 1 (forgotten)" in last.text
    assert "Restored" in (await press(core, last, "♻ Restore m1")).text
    assert "22 items, page 3 of 3" in (await run(core, "/memory trash 99")).text
    assert "Matching “trash can”" in (await run(core, "/memory trash can")).text  # words


async def test_the_trash_of_a_few_items_has_no_pages(core: Core) -> None:
    await remember(core, "I collect stamps")
    await run(core, "/forget stamps")
    trash = await run(core, "/memory trash")
    assert trash.text.splitlines()[0] == (
        "In the trash (deleted for good 30 days after forgetting):"
    )
    assert labels(trash) == ["♻ Restore m1"]


async def test_search_text_that_was_cut_says_so(core: Core) -> None:
    await remember(core, "I work at the library")
    long_search = "library " + "x" * 300
    found = await run(core, f"/memory {long_search}")
    assert "I only searched for the first 200 characters" in found.text
    assert "library" in found.text
    short = await run(core, "/memory library")
    assert "m1 · I work at the library" in short.text and "characters" not in short.text
    too_long = await run(core, "/forget " + "y" * 201)
    assert "too long to search for" in too_long.text
