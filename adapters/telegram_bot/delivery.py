"""The `Delivery` port on Telegram: proactive messages to a person's private chat, with
Telegram's errors translated into `DeliveryFailed` reasons.

Reasons: 'blocked' (the person blocked the bot or never started it), 'unreachable' (no
such chat, a deactivated account, not a private chat), 'rate_limited' (flood control
outlasted our retries), 'error' (anything else: network trouble, an unexpected answer).
After 'blocked' or 'unreachable' from Telegram, the identity is marked unreachable.
"""

from __future__ import annotations

import structlog
from telegram import Bot
from telegram.error import BadRequest, ChatMigrated, Forbidden, RetryAfter, TelegramError

from adapters.telegram_bot.inbound import PLATFORM
from adapters.telegram_bot.outbound import TelegramSender
from bot.domain import Recipient, Reply
from bot.errors import DeliveryFailed
from memory.store.conversations import SqlConversationStore

log = structlog.get_logger(__name__)

_GONE = ("chat not found", "user not found", "deactivated")


def failure_for(exc: TelegramError) -> DeliveryFailed:
    """The `DeliveryFailed` a Telegram error means."""
    detail = exc.message[:200]
    lowered = detail.lower()
    if isinstance(exc, Forbidden):
        return DeliveryFailed("unreachable" if "deactivated" in lowered else "blocked", detail)
    if isinstance(exc, RetryAfter):
        return DeliveryFailed("rate_limited", detail)
    if isinstance(exc, ChatMigrated) or (
        isinstance(exc, BadRequest) and any(gone in lowered for gone in _GONE)
    ):
        return DeliveryFailed("unreachable", detail)
    return DeliveryFailed("error", f"{type(exc).__name__}: {detail}")


def private_chat_id(recipient: Recipient) -> int:
    """The recipient's private chat id (in Telegram, their user id); groups are refused."""
    raw = recipient.chat_id or recipient.platform_user_id
    try:
        chat_id = int(raw)
    except ValueError:
        raise DeliveryFailed("unreachable", "not a Telegram chat id") from None
    if chat_id <= 0:
        raise DeliveryFailed("unreachable", "proactive messages go to private chats only")
    return chat_id


class TelegramDelivery:
    """Sends a `Reply` to a person's private chat (split, HTML, buttons, documents)."""

    platform = PLATFORM

    def __init__(self, bot: Bot, store: SqlConversationStore) -> None:
        self._sender = TelegramSender(bot)
        self._store = store

    async def send(self, recipient: Recipient, reply: Reply) -> str:
        """Deliver; the id of the last Telegram message sent ('' when nothing was)."""
        if recipient.platform != PLATFORM:
            raise DeliveryFailed("error", f"not a Telegram recipient: {recipient.platform}")
        chat_id = private_chat_id(recipient)
        try:
            message_id = await self._sender.send(chat_id, reply)
        except TelegramError as exc:
            failure = failure_for(exc)
            log.warning("telegram.delivery_failed", reason=failure.reason, error=type(exc).__name__)
            if failure.reason in {"blocked", "unreachable"}:
                await self._store.set_reachable(
                    platform=PLATFORM, platform_user_id=recipient.platform_user_id, reachable=False
                )
            raise failure from exc
        return str(message_id) if message_id is not None else ""

    async def edit(self, chat_id: str, message_id: str, reply: Reply) -> None:
        """Show `reply` in place of an earlier message (an import's progress)."""
        try:
            await self._sender.edit(int(chat_id), int(message_id), reply)
        except TelegramError as exc:
            raise failure_for(exc) from exc
