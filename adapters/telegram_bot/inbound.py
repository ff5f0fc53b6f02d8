"""Reading Telegram messages: whether one is for the bot, what it says, and the core's
`IncomingMessage` for it. Pure functions over python-telegram-bot objects."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from telegram import Message, MessageEntity
from telegram.constants import ChatType

from bot.chat_exports import looks_importable
from bot.commands.router import ParsedCommand, parse_command
from bot.domain import Attachment, IncomingMessage
from bot.text import clean_text

PLATFORM = "telegram"
GROUP_TYPES = frozenset({ChatType.GROUP, ChatType.SUPERGROUP})
# Checked in order: an animation also carries a document, a venue also a location.
UNSUPPORTED_KINDS = (
    ("photo", "photos"),
    ("sticker", "stickers"),
    ("voice", "voice messages"),
    ("video_note", "video messages"),
    ("animation", "GIFs"),
    ("video", "videos"),
    ("audio", "audio files"),
    ("document", "files"),
    ("venue", "places"),
    ("location", "locations"),
    ("contact", "contacts"),
    ("poll", "polls"),
    ("dice", "dice"),
    ("story", "stories"),
)


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is (from getMe), to recognise mentions and replies to it."""

    id: int
    username: str


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message the bot should answer, and where it came from."""

    incoming: IncomingMessage
    chat_id: int
    user_id: int
    message_id: int
    private: bool
    command: ParsedCommand | None = None
    unsupported: str | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    """A person edited an earlier message; `text` is its new text as the core stores it."""

    user_id: int
    chat_id: int
    message_id: int
    text: str


def read_message(message: Message, me: BotIdentity) -> Inbound | None:
    """The message as the core should see it; None when it is not for the bot."""
    user = message.from_user
    if user is None or user.is_bot:
        return None
    private = message.chat.type == ChatType.PRIVATE
    if not private and (message.chat.type not in GROUP_TYPES or not addressed(message, me)):
        return None
    raw = message.text if message.text is not None else message.caption
    attachment = document_of(message)
    unsupported = unsupported_kind(message) if raw is None and attachment is None else None
    if raw is None and unsupported is None and attachment is None:
        return None
    text = clean_text(raw or "")
    if not private:
        text = strip_mention(text, me.username)
    incoming = IncomingMessage(
        platform=PLATFORM,
        platform_user_id=str(user.id),
        text=text,
        chat_id=str(message.chat.id),
        display_name=user.full_name or None,
        platform_message_id=str(message.message_id),
        sent_at=message.date,
        is_private=private,
        locale=user.language_code,
        attachment=attachment,
    )
    return Inbound(
        incoming=incoming,
        chat_id=message.chat.id,
        user_id=user.id,
        message_id=message.message_id,
        private=private,
        command=parse_command(text) if raw is not None and attachment is None else None,
        unsupported=unsupported,
    )


def read_edit(message: Message, me: BotIdentity) -> Edit | None:
    """The new text of an edited message (mention stripped in groups); None without text."""
    user = message.from_user
    raw = message.text if message.text is not None else message.caption
    if user is None or user.is_bot or raw is None:
        return None
    text = clean_text(raw)
    if message.chat.type != ChatType.PRIVATE:
        text = strip_mention(text, me.username)
    return Edit(user.id, message.chat.id, message.message_id, text)


def addressed(message: Message, me: BotIdentity) -> bool:
    """In a group: the bot is mentioned, replied to, or sent a command meant for it."""
    text = message.text if message.text is not None else message.caption or ""
    if text.startswith("/"):
        return command_is_for(text, me)
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == me.id:
        return True
    return mentions(message, me)


def command_is_for(text: str, me: BotIdentity) -> bool:
    """`/help` and `/help@thisbot` are for this bot; `/help@otherbot` is not."""
    head = text.split(maxsplit=1)[0]
    target = head.partition("@")[2]
    return not target or target.lower() == me.username.lower()


def mentions(message: Message, me: BotIdentity) -> bool:
    """The message @-mentions the bot (by entity, or in the text itself)."""
    kinds: list[str | None] = [MessageEntity.MENTION, MessageEntity.TEXT_MENTION]
    found = (
        message.parse_entities(kinds)
        if message.text is not None
        else message.parse_caption_entities(kinds)
    )
    handle = f"@{me.username}".lower()
    for entity, value in found.items():
        if entity.type == MessageEntity.MENTION and value.lower() == handle:
            return True
        if entity.user is not None and entity.user.id == me.id:
            return True
    text = message.text if message.text is not None else message.caption or ""
    return _mention_pattern(me.username).search(text) is not None


def strip_mention(text: str, username: str) -> str:
    """The text without `@username` (and the comma or colon that often follows it)."""
    pattern = _mention_pattern(username)
    if pattern.search(text) is None:
        return text
    stripped = pattern.sub("", text)
    stripped = re.sub(r"^[\s,:;]+", "", stripped)
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()


def document_of(message: Message) -> Attachment | None:
    """A file sent as a document (a chat export to import), fetched only when read."""
    document = message.document
    if document is None or message.animation is not None:
        return None
    if not looks_importable(document.file_name or ""):
        return None

    async def fetch(path: Path) -> None:
        found = await message.get_bot().get_file(document.file_id)
        await found.download_to_drive(path)

    return Attachment(document.file_name or "document", document.file_size, fetch)


def unsupported_kind(message: Message) -> str | None:
    """What a message without text holds, in words ('photos'); None for service messages."""
    for attribute, label in UNSUPPORTED_KINDS:
        if getattr(message, attribute, None):
            return label
    return None


def _mention_pattern(username: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w@/])@{re.escape(username)}(?!\w)", re.IGNORECASE)
