"""One message of each export format as an `ExportedMessage`: pure functions over the
decoded JSON of a single message (or a single ChatGPT conversation). Messages without
text (photos, stickers, joins, calls, hidden system turns) are skipped."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

MAX_TEXT_CHARS = 8000
CHATGPT_SELF = "You"
CHATGPT_OTHER = "ChatGPT"
_DISCORD_KINDS = frozenset({"Default", "Reply"})


@dataclass(frozen=True, slots=True)
class ExportedMessage:
    """One message of an export: who wrote it (as the export names them, and their id
    there when it has one), its text and when it was sent (None when the file has no
    dates). `conversation` changes where a new conversation starts (ChatGPT)."""

    author: str
    text: str
    sent_at: datetime | None
    author_id: str | None = None
    conversation: str | None = None


def _clip(text: str) -> str:
    return text.strip()[:MAX_TEXT_CHARS]


def telegram_message(item: Any, zone: ZoneInfo) -> ExportedMessage | None:
    """A Telegram Desktop message; None for service messages and ones without text."""
    if not isinstance(item, Mapping) or item.get("type") != "message":
        return None
    text = _clip(_telegram_text(item.get("text")))
    if not text:
        return None
    author = item.get("from") or "Deleted Account"
    author_id = item.get("from_id")
    return ExportedMessage(
        author=str(author)[:200],
        text=text,
        sent_at=_telegram_date(item, zone),
        author_id=str(author_id) if author_id is not None else None,
    )


def _telegram_text(value: Any) -> str:
    """`text` is a string, or a list of strings and entity objects with their own text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in value
            if isinstance(part, str | Mapping)
        )
    return ""


def _telegram_date(item: Mapping[str, Any], zone: ZoneInfo) -> datetime | None:
    """`date_unixtime` (UTC) when present, else `date` (the exporter's local time, read
    in the person's zone)."""
    unix = item.get("date_unixtime")
    try:
        if unix is not None:
            return datetime.fromtimestamp(int(unix), UTC)
        local = datetime.fromisoformat(str(item.get("date")))
    except (TypeError, ValueError, OverflowError, OSError):
        return None
    return local.replace(tzinfo=zone) if local.tzinfo is None else local


def discord_message(item: Any) -> ExportedMessage | None:
    """A DiscordChatExporter message; None for joins, pins, calls and ones without text."""
    if not isinstance(item, Mapping) or item.get("type", "Default") not in _DISCORD_KINDS:
        return None
    text = _clip(str(item.get("content") or ""))
    author = item.get("author")
    if not text or not isinstance(author, Mapping):
        return None
    name = author.get("nickname") or author.get("name") or "Unknown"
    try:
        sent_at = datetime.fromisoformat(str(item.get("timestamp")))
    except ValueError:
        sent_at = None
    if sent_at is not None and sent_at.tzinfo is None:
        sent_at = sent_at.replace(tzinfo=UTC)
    author_id = author.get("id")
    return ExportedMessage(
        author=str(name)[:200],
        text=text,
        sent_at=sent_at,
        author_id=str(author_id) if author_id is not None else None,
    )


def chatgpt_messages(conversation: Any) -> Iterator[ExportedMessage]:
    """The visible branch of one ChatGPT conversation (from `current_node` back to the
    root, so edited turns and regenerated replies show only as the person last saw
    them), user and assistant turns with text."""
    if not isinstance(conversation, Mapping):
        return
    mapping = conversation.get("mapping")
    if not isinstance(mapping, Mapping):
        return
    key = str(conversation.get("id") or conversation.get("conversation_id") or id(mapping))
    for node in _branch(mapping, conversation.get("current_node")):
        found = _chatgpt_turn(node, key)
        if found is not None:
            yield found


def _branch(mapping: Mapping[str, Any], current: Any) -> list[Mapping[str, Any]]:
    """The nodes from the root to `current` (the last leaf when it is missing)."""
    if current not in mapping:
        current = _last_leaf(mapping)
    path: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    while isinstance(current, str) and current in mapping and current not in seen:
        seen.add(current)
        node = mapping[current]
        if not isinstance(node, Mapping):
            break
        path.append(node)
        current = node.get("parent")
    path.reverse()
    return path


def _last_leaf(mapping: Mapping[str, Any]) -> str | None:
    leaves = [
        key
        for key, node in mapping.items()
        if isinstance(node, Mapping) and not node.get("children")
    ]
    return leaves[-1] if leaves else None


def _chatgpt_turn(node: Mapping[str, Any], conversation: str) -> ExportedMessage | None:
    message = node.get("message")
    if not isinstance(message, Mapping):
        return None
    role = (message.get("author") or {}).get("role")
    metadata = message.get("metadata") or {}
    if role not in ("user", "assistant") or metadata.get("is_visually_hidden_from_conversation"):
        return None
    content = message.get("content") or {}
    parts = content.get("parts") if isinstance(content, Mapping) else None
    if not isinstance(parts, list):
        return None
    text = _clip("\n".join(part for part in parts if isinstance(part, str)))
    if not text:
        return None
    created = message.get("create_time")
    sent_at = (
        datetime.fromtimestamp(float(created), UTC) if isinstance(created, int | float) else None
    )
    return ExportedMessage(
        author=CHATGPT_SELF if role == "user" else CHATGPT_OTHER,
        text=text,
        sent_at=sent_at,
        author_id=role,
        conversation=conversation,
    )
