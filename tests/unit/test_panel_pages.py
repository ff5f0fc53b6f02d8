"""The memory panel's HTML: every piece of memory text escaped wherever it appears,
no inline script or style, cards grouped pinned first then by tier and category, and
the static files shipped as package data."""

from __future__ import annotations

import re
import tomllib
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from adapters.panel import pages
from adapters.panel.app import STATIC
from bot.panel.view import build_view
from memory.store.diary import DiaryRecord
from memory.store.items import MemoryItem
from memory.store.panel_reads import PanelSnapshot
from memory.store.records import Person
from memory.store.threads import ThreadInfo

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HOSTILE = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


def item(short_id: int, content: str, **values: object) -> MemoryItem:
    fields: dict[str, object] = {
        "id": short_id,
        "short_id": short_id,
        "user_id": 1,
        "tier": "core",
        "category": "fact",
        "content": content,
        "importance": 5.0,
        "confidence": 0.7,
        "source": "extracted",
        "pinned": False,
        "status": "active",
        "event_at": None,
        "expires_at": None,
        "valid_from": NOW,
        "valid_until": None,
        "created_at": NOW,
    }
    fields.update(values)
    return MemoryItem(**fields)  # type: ignore[arg-type]


def person() -> Person:
    return Person(
        id=1,
        display_name="Ann",
        timezone="Europe/Copenhagen",
        checkin_time=None,
        quiet_start=None,
        quiet_end=None,
        paused=False,
        memory_notices=True,
        created_at=NOW,
    )


def test_hostile_text_is_escaped_in_cards_versions_threads_and_diary() -> None:
    old = item(1, HOSTILE + " old", valid_until=NOW, superseded_by=2, status="active")
    new = item(2, HOSTILE, source="user", thread_id=7)
    snapshot = PanelSnapshot((new,), {2: (old,)}, (ThreadInfo(7, HOSTILE),))
    diary = [DiaryRecord(1, date(2026, 3, 1), (HOSTILE,), (HOSTILE,), NOW)]
    html = pages.panel_page(build_view(person(), snapshot, diary, pin_limit=20), '"csrf<')
    assert "<script>alert" not in html and "<img" not in html
    # The card's text and its textarea, the earlier version, the thread's title and its
    # item, the diary's line and note to self.
    assert html.count("&lt;script&gt;alert(2)&lt;/script&gt;") == 7
    assert 'data-csrf="&quot;csrf&lt;"' in html
    assert not re.search(r"<[^>]*\s(style|on[a-z]+)=", html)
    assert re.findall(r"<script[^>]*>", html) == ['<script src="static/panel.js" defer>']


def test_cards_are_grouped_pinned_first_then_tier_and_category() -> None:
    items = (
        item(1, "an active goal", tier="active", category="goal"),
        item(2, "a core fact"),
        item(3, "a pinned preference", category="preference", pinned=True),
        item(4, "a relationship", category="relationship", importance=9.0),
        item(5, "faded", status="dead"),
        item(
            6,
            "an event",
            tier="active",
            category="event",
            event_at=NOW + timedelta(days=2),
            expires_at=NOW + timedelta(days=9),
        ),
    )
    view = build_view(person(), PanelSnapshot(items, {}, ()), [], pin_limit=3)
    assert [g.title for g in view.groups] == [
        "Pinned",
        "Core · Facts about you",
        "Core · People in your life",
        "Active · Goals",
        "Active · Coming up and recent",
    ]
    assert [c.short_id for c in view.groups[1].cards] == [2, 5]
    assert view.groups[1].cards[1].faded
    event = view.groups[-1].cards[0]
    assert (event.event, event.expires) == ("4 Mar 2026", "11 Mar 2026")
    assert view.pinned == 1 and view.count == 6


def test_source_words_and_confidence() -> None:
    told = item(1, "told", source="user", confidence=1.0)
    noticed = item(2, "noticed", confidence=0.62)
    edited = item(3, "edited", source="user")
    earlier = item(4, "before", valid_until=NOW, superseded_by=3)
    view = build_view(
        person(), PanelSnapshot((told, noticed, edited), {3: (earlier,)}, ()), [], pin_limit=3
    )
    cards = {c.short_id: c for g in view.groups for c in g.cards}
    assert cards[1].source_words == "you told me" and cards[1].confidence is None
    assert cards[2].source_words == "I noticed" and cards[2].confidence == 0.62
    assert cards[3].source_words == "you edited" and cards[3].versions[0].text == "before"
    html = pages.card(cards[2])
    assert 'value="62"' in html and "fairly sure (62%)" in html


def test_the_static_files_ship_with_the_package() -> None:
    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["adapters"]
    shipped = {p.name for pattern in patterns for p in (root / "adapters").glob(pattern)}
    assert {"panel.js", "panel.css"} <= shipped
    assert {p.name for p in STATIC.iterdir()} <= shipped
