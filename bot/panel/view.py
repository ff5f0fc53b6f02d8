"""What the memory panel shows, as plain values: cards grouped by tier and category
(pinned first), each card's source, confidence, dates and versions; the threads with
their items in order; the diary. Rendering them as HTML is the adapter's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from memory.local_time import zone_of
from memory.store.diary import DiaryRecord
from memory.store.items import MemoryItem
from memory.store.panel_reads import PanelSnapshot
from memory.store.records import Person

CATEGORY_TITLES = {
    "identity": "Who you are",
    "fact": "Facts about you",
    "relationship": "People in your life",
    "preference": "What you like",
    "thread": "Going on now",
    "goal": "Goals",
    "emotion": "How you've been feeling",
    "event": "Coming up and recent",
}
CATEGORY_ORDER = tuple(CATEGORY_TITLES)
TIER_TITLES = {"core": "Core", "active": "Active"}
SOURCE_WORDS = {"told": "you told me", "noticed": "I noticed", "edited": "you edited"}


@dataclass(frozen=True, slots=True)
class Version:
    """An earlier wording of a memory."""

    text: str
    made: str
    source: str


@dataclass(frozen=True, slots=True)
class Card:
    """One memory as the panel shows it (dates already in the person's timezone)."""

    short_id: int
    label: str
    text: str
    tier: str
    category: str
    pinned: bool
    source: str  # told | noticed | edited
    confidence: float | None  # shown for what the companion noticed
    made: str
    confirmed: str | None
    expires: str | None
    event: str | None
    unsure: bool
    faded: bool
    versions: tuple[Version, ...]

    @property
    def source_words(self) -> str:
        """'you told me', 'I noticed' or 'you edited'."""
        return SOURCE_WORDS[self.source]


@dataclass(frozen=True, slots=True)
class Group:
    """Cards under one heading."""

    key: str
    title: str
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class ThreadView:
    """An ongoing thread and its items, in the order they happened."""

    title: str
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class DiaryDay:
    """One diary entry."""

    day: str
    lines: tuple[str, ...]
    notes: tuple[str, ...]
    withdrawn: bool


@dataclass(frozen=True, slots=True)
class PanelView:
    """The whole panel for one person."""

    groups: tuple[Group, ...]
    threads: tuple[ThreadView, ...]
    diary: tuple[DiaryDay, ...]
    pinned: int
    pin_limit: int

    @property
    def count(self) -> int:
        """How many memories are shown."""
        return sum(len(group.cards) for group in self.groups)


def _day(when: datetime | None, zone: ZoneInfo) -> str | None:
    return f"{when.astimezone(zone):%-d %b %Y}" if when is not None else None


def source_of(item: MemoryItem, versions: tuple[MemoryItem, ...]) -> str:
    """Where a memory came from, in the panel's three words."""
    if item.source != "user":
        return "noticed"
    return "edited" if versions else "told"


def card_of(item: MemoryItem, versions: tuple[MemoryItem, ...], zone: ZoneInfo) -> Card:
    """One memory as a card."""
    source = source_of(item, versions)
    return Card(
        short_id=item.short_id,
        label=item.label,
        text=item.content,
        tier=item.tier,
        category=item.category,
        pinned=item.pinned,
        source=source,
        confidence=item.confidence if source == "noticed" else None,
        made=_day(item.created_at, zone) or "",
        confirmed=_day(item.last_confirmed_at, zone),
        expires=_day(item.expires_at, zone) if item.tier == "active" and not item.pinned else None,
        event=_day(item.event_at, zone),
        unsure=item.unsure,
        faded=item.status in ("dying", "dead"),
        versions=tuple(
            Version(v.content, _day(v.created_at, zone) or "", SOURCE_WORDS[source_of(v, ())])
            for v in versions
        ),
    )


def _group_key(card: Card) -> tuple[int, int]:
    tier = 0 if card.tier == "core" else 1
    return (0, 0) if card.pinned else (1 + tier, CATEGORY_ORDER.index(card.category))


def build_view(
    person: Person,
    snapshot: PanelSnapshot,
    diary: list[DiaryRecord],
    *,
    pin_limit: int,
) -> PanelView:
    """The panel's content for one person."""
    zone = zone_of(person.timezone)
    cards = [card_of(i, snapshot.versions.get(i.id, ()), zone) for i in snapshot.items]
    by_item = {item.id: card for item, card in zip(snapshot.items, cards, strict=True)}
    order = sorted(
        range(len(cards)), key=lambda n: (_group_key(cards[n]), -snapshot.items[n].importance)
    )
    groups: dict[tuple[int, int], list[Card]] = {}
    for n in order:
        groups.setdefault(_group_key(cards[n]), []).append(cards[n])
    return PanelView(
        groups=tuple(_group(key, members) for key, members in groups.items()),
        threads=_threads(snapshot, by_item),
        diary=tuple(
            DiaryDay(f"{e.local_date:%A %-d %B %Y}", e.lines, e.notes_to_self, e.withdrawn)
            for e in diary
        ),
        pinned=sum(1 for card in cards if card.pinned and not card.faded),
        pin_limit=pin_limit,
    )


def _group(key: tuple[int, int], cards: list[Card]) -> Group:
    if key == (0, 0):
        return Group("pinned", "Pinned", tuple(cards))
    tier = "core" if key[0] == 1 else "active"
    category = CATEGORY_ORDER[key[1]]
    title = f"{TIER_TITLES[tier]} · {CATEGORY_TITLES[category]}"
    return Group(f"{tier}-{category}", title, tuple(cards))


def _threads(snapshot: PanelSnapshot, by_item: dict[int, Card]) -> tuple[ThreadView, ...]:
    """Live threads with their current items, earliest first."""
    members: dict[int, list[MemoryItem]] = {}
    for item in snapshot.items:
        if item.thread_id is not None:
            members.setdefault(item.thread_id, []).append(item)
    views = []
    for thread in snapshot.threads:
        items = sorted(members.get(thread.id, []), key=lambda i: (i.event_at or i.created_at, i.id))
        if items:
            views.append(ThreadView(thread.title, tuple(by_item[i.id] for i in items)))
    return tuple(views)
