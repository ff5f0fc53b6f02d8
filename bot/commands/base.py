"""What every command handler has at hand: the person who asked, the stores, buttons."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bot.domain import Button, ButtonPress, IncomingMessage
from bot.imports import ImportConfig
from bot.panel.links import PanelLinks
from memory.care.provenance import record_command
from memory.care.repository import SqlMemoryRepository
from memory.store.actions import Action, SqlActionStore
from memory.store.conversations import SqlConversationStore
from memory.store.database import Database
from memory.store.ports import Clock, ToolCaller
from memory.store.records import Person

ACTION_PREFIX = "a"
MAX_SEARCH = 200  # characters of text to look for in what is remembered


@dataclass(frozen=True, slots=True)
class CommandDeps:
    """The collaborators of the commands."""

    sessions: Database
    store: SqlConversationStore
    memories: SqlMemoryRepository
    actions: SqlActionStore
    clock: Clock
    tool_caller: ToolCaller | None
    pin_limit: int = 20
    page_size: int = 10
    imports: ImportConfig = field(default_factory=ImportConfig)
    panel: PanelLinks | None = None


@dataclass(frozen=True, slots=True)
class ButtonSpec:
    """A button before it has a token: its label and what it does."""

    label: str
    verb: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CommandSource:
    """Where a command came from (platform and chat) and its whole text, kept as the
    person's words when the command makes or changes a memory."""

    platform: str
    chat_id: str | None
    text: str
    is_private: bool = True


async def record_source(deps: CommandDeps, person: Person, source: CommandSource) -> int:
    """Store the command's text as the person's message (never read as conversation)
    and return its id, the provenance of the memory the command makes."""
    return await record_command(
        deps.sessions,
        user_id=person.id,
        platform=source.platform,
        chat_id=source.chat_id,
        text=source.text,
        now=deps.clock.now(),
    )


async def person_of(deps: CommandDeps, source: IncomingMessage | ButtonPress) -> Person:
    """The person who sent a command or pressed a button (created on first contact)."""
    return await deps.store.ensure_person(
        platform=source.platform,
        platform_user_id=source.platform_user_id,
        chat_id=source.chat_id,
        display_name=source.display_name,
        private_chat=source.is_private,
    )


async def make_buttons(
    deps: CommandDeps,
    person: Person,
    rows: Sequence[Sequence[ButtonSpec]],
    *,
    ttl: timedelta = timedelta(days=7),
    single_use: bool = False,
) -> tuple[tuple[Button, ...], ...]:
    """Buttons whose actions are opaque tokens resolved later for this person only."""
    flat = [spec for row in rows for spec in row]
    if not flat:
        return ()
    tokens = await deps.actions.issue_many(
        person.id,
        [Action(spec.verb, spec.payload) for spec in flat],
        now=deps.clock.now(),
        ttl=ttl,
        single_use=single_use,
    )
    issued = iter(zip(flat, tokens, strict=True))
    return tuple(
        tuple(
            Button(spec.label, f"{ACTION_PREFIX}:{token}")
            for spec, token in (next(issued) for _ in row)
        )
        for row in rows
        if row
    )


def parse_label(text: str) -> int | None:
    """'m12' or 'M12' or '12' → 12; anything else → None."""
    raw = text.strip().lower().removeprefix("#")
    raw = raw[1:] if raw.startswith("m") else raw
    return int(raw) if is_number(raw) and len(raw) < 9 else None


def is_number(text: str) -> bool:
    """Plain ASCII digits only ('²' and '٣' are digits to Python, not to us)."""
    return text.isascii() and text.isdecimal()
