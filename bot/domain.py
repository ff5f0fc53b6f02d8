"""Platform-neutral values that cross the boundary between adapters and the core."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a person sent (a Telegram document, a Discord attachment): its name, its
    size as the platform reports it, and how to fetch it into a local file."""

    filename: str
    size: int | None
    fetch: Callable[[Path], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """One message a person sent, as an adapter hands it to the core."""

    platform: str
    platform_user_id: str
    text: str
    chat_id: str | None = None
    display_name: str | None = None
    platform_message_id: str | None = None
    sent_at: datetime | None = None
    is_private: bool = True
    locale: str | None = None
    """The person's language tag as the platform tells it ('en-US', 'de'), if it does."""
    local_zone: str | None = None
    """The IANA zone of the machine the person types on (the terminal), if known."""
    attachment: Attachment | None = None
    """A file sent with the message (only chat exports are read, to import them)."""


@dataclass(frozen=True, slots=True)
class Button:
    """A button under a reply; `action` is an opaque id the core resolves later."""

    label: str
    action: str
    url: str | None = None
    """A button that opens this address instead of sending `action` back."""
    web_app: bool = False
    """With `url`: open it as a Telegram Mini App (private chats only)."""


@dataclass(frozen=True, slots=True)
class Document:
    """A file attached to a reply (e.g. `/export`)."""

    filename: str
    content: bytes
    mime_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class Reply:
    """What the core answers: text, optional buttons (rows), an optional document.

    `private` marks content that must only be shown to the person themselves (in a
    private chat or an ephemeral reply), never in a group.
    """

    text: str
    buttons: tuple[tuple[Button, ...], ...] = ()
    document: Document | None = None
    private: bool = False
    silent: bool = False
    extras: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """A person pressed a button; `action` is the opaque id from `Button.action`."""

    platform: str
    platform_user_id: str
    action: str
    chat_id: str | None = None
    display_name: str | None = None
    is_private: bool = True
    message_id: str | None = None
    """The platform id of the message the button is under (it is edited in place)."""


@dataclass(frozen=True, slots=True)
class Recipient:
    """Where a proactive message goes: a person's private chat on one platform."""

    user_id: int
    platform: str
    platform_user_id: str
    chat_id: str
