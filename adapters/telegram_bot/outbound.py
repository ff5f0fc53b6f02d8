"""Rendering a `Reply` as Telegram messages: split to the length limit, as HTML (its
Markdown as tags, everything else escaped; `markup`) with a plain-text fallback, buttons
as an inline keyboard, documents as uploads."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    Message,
    ReplyParameters,
    WebAppInfo,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, TimedOut

from adapters.splitting import split_text
from adapters.telegram_bot.markup import to_html
from bot.domain import Button, Document, Reply

log = structlog.get_logger(__name__)

MAX_MESSAGE = 4096
MAX_CALLBACK_DATA = 64
RETRY_DELAYS = (0.5, 2.0)  # before the second and third attempt after a 5xx or a refusal

T = TypeVar("T")


async def retrying(call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, again after a 5xx or a failed connection (the message was not taken).
    A timeout is not retried: Telegram may have delivered it, and twice is worse."""
    for delay in (*RETRY_DELAYS, None):
        try:
            return await call()
        except (TimedOut, BadRequest):  # BadRequest is a NetworkError too in PTB
            raise
        except NetworkError as exc:
            if delay is None:
                raise
            log.warning("telegram.send_retried", error=exc.message[:80], after_seconds=delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


async def _html_or_plain(
    as_html: Callable[[], Awaitable[T]], as_plain: Callable[[], Awaitable[T]]
) -> T:
    """`as_html()` (with `retrying`); when Telegram cannot parse our markup, `as_plain()`."""
    try:
        return await retrying(as_html)
    except BadRequest as exc:
        if not is_parse_error(exc):
            raise
        log.warning("telegram.html_rejected", error=exc.message[:120])
        return await retrying(as_plain)


def _replying_to(message_id: int | None) -> ReplyParameters | None:
    """A reply to `message_id` that is still sent when that message is gone."""
    if message_id is None:
        return None
    return ReplyParameters(message_id, allow_sending_without_reply=True)


def utf16_len(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def chunks(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """Pieces Telegram accepts: at most `limit` UTF-16 units each (emoji count twice)."""
    size = limit
    while True:
        pieces = split_text(text, size)
        if all(utf16_len(piece) <= limit for piece in pieces):
            return pieces
        size = max(size - limit // 8, 1)


def keyboard(rows: tuple[tuple[Button, ...], ...]) -> InlineKeyboardMarkup | None:
    """Inline buttons whose callback data is the action; an over-long action is left out."""
    markup: list[list[InlineKeyboardButton]] = []
    for row in rows:
        buttons = []
        for button in row:
            if button.url is not None:
                buttons.append(_link_button(button))
                continue
            size = len(button.action.encode())
            if not 1 <= size <= MAX_CALLBACK_DATA or not button.label.strip():
                log.warning("telegram.button_dropped", action_bytes=size)
                continue
            buttons.append(InlineKeyboardButton(button.label, callback_data=button.action))
        if buttons:
            markup.append(buttons)
    return InlineKeyboardMarkup(markup) if markup else None


def _link_button(button: Button) -> InlineKeyboardButton:
    """A button opening an address: as a Mini App (the memory panel) or a plain link."""
    if button.web_app:
        return InlineKeyboardButton(button.label, web_app=WebAppInfo(button.url or ""))
    return InlineKeyboardButton(button.label, url=button.url)


def is_parse_error(exc: BadRequest) -> bool:
    """Telegram could not parse the message's entities (formatting)."""
    return "can't parse entities" in exc.message.lower()


class TelegramSender:
    """Sends and edits replies in one chat at a time; Telegram errors propagate."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot

    async def send(self, chat_id: int, reply: Reply, *, reply_to: int | None = None) -> int | None:
        """Send the reply (text pieces, then any document); the last message's id."""
        if reply.silent:
            return None
        markup = keyboard(reply.buttons)
        last = await self._send_pieces(chat_id, _pieces(reply), markup, reply.document, reply_to)
        if last is None:
            log.warning("telegram.nothing_to_send")
        return last

    async def edit(self, chat_id: int, message_id: int, reply: Reply) -> int | None:
        """Show the reply in place of message `message_id` (its buttons too); overflow and
        documents follow as new messages. Falls back to sending when it cannot edit."""
        if reply.silent:
            return None
        pieces = _pieces(reply)
        if not pieces:
            return await self.send(chat_id, reply)
        markup = keyboard(reply.buttons)
        single = len(pieces) == 1 and reply.document is None
        try:
            await self._edit_text(chat_id, message_id, pieces[0], markup if single else None)
        except BadRequest as exc:
            if "not modified" not in exc.message.lower():
                log.info("telegram.edit_fell_back", error=exc.message[:120])
                return await self.send(chat_id, reply)
        last = await self._send_pieces(chat_id, pieces[1:], markup, reply.document, None)
        return last if last is not None else message_id

    async def typing(self, chat_id: int) -> None:
        """Show 'typing…' in the chat (Telegram shows it for about five seconds)."""
        await self.bot.send_chat_action(chat_id, ChatAction.TYPING)

    async def _send_pieces(
        self,
        chat_id: int,
        pieces: list[str],
        markup: InlineKeyboardMarkup | None,
        document: Document | None,
        reply_to: int | None,
    ) -> int | None:
        """Text pieces, then the document; buttons under the last message; its id."""
        last: int | None = None
        for number, piece in enumerate(pieces, 1):
            final = number == len(pieces) and document is None
            message = await self._send_text(
                chat_id, piece, markup if final else None, reply_to if number == 1 else None
            )
            last = message.message_id
        if document is not None:
            message = await self._send_document(
                chat_id, document, markup, reply_to if not pieces else None
            )
            last = message.message_id
        return last

    async def _send_text(
        self,
        chat_id: int,
        text: str,
        markup: InlineKeyboardMarkup | None,
        reply_to: int | None,
    ) -> Message:
        replying = _replying_to(reply_to)
        return await _html_or_plain(
            lambda: self.bot.send_message(
                chat_id,
                to_html(text),
                parse_mode=ParseMode.HTML,
                reply_markup=markup,
                reply_parameters=replying,
            ),
            lambda: self.bot.send_message(
                chat_id, text, reply_markup=markup, reply_parameters=replying
            ),
        )

    async def _edit_text(
        self, chat_id: int, message_id: int, text: str, markup: InlineKeyboardMarkup | None
    ) -> None:
        await _html_or_plain(
            lambda: self.bot.edit_message_text(
                to_html(text),
                chat_id=chat_id,
                message_id=message_id,
                parse_mode=ParseMode.HTML,
                reply_markup=markup,
            ),
            lambda: self.bot.edit_message_text(
                text, chat_id=chat_id, message_id=message_id, reply_markup=markup
            ),
        )

    async def _send_document(
        self,
        chat_id: int,
        document: Document,
        markup: InlineKeyboardMarkup | None,
        reply_to: int | None,
    ) -> Message:
        replying = _replying_to(reply_to)
        return await retrying(
            lambda: self.bot.send_document(
                chat_id,
                InputFile(document.content, filename=document.filename),
                reply_markup=markup,
                reply_parameters=replying,
            )
        )


def _pieces(reply: Reply) -> list[str]:
    return chunks(reply.text) if reply.text.strip() else []
