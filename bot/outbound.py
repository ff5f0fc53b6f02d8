"""Sending to a person on their own (notices, check-ins): pick their reachable private
chat on a platform that is running, and deliver through that platform's port."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

import structlog

from bot.delivery import Delivery, EditingDelivery
from bot.domain import Recipient, Reply
from bot.errors import DeliveryFailed
from memory.store.database import Database
from memory.store.delivery import reachable_chats

log = structlog.get_logger(__name__)


class Outbound:
    """The running platforms' delivery ports, by platform name."""

    def __init__(self, sessions: Database) -> None:
        self._sessions = sessions
        self._deliveries: dict[str, Delivery] = {}
        self._given_up: set[str] = set()
        self._registered = asyncio.Event()

    def register(self, delivery: Delivery) -> None:
        """Add a platform's delivery port (adapters do this when they start)."""
        self._deliveries[delivery.platform] = delivery
        self._given_up.discard(delivery.platform)
        self._registered.set()

    def give_up(self, platform: str) -> None:
        """Note that a platform's adapter stopped for good (its supervisor gave up): the
        others' proactive messages no longer wait for it."""
        self._given_up.add(platform)
        self._registered.set()

    async def wait_for(self, platforms: Collection[str]) -> None:
        """Return once every one of `platforms` has registered its delivery port or been
        given up (so proactive messages sent at start-up are not failed for want of a
        platform that is still connecting, and one that never connects holds up none)."""
        while not set(platforms) <= set(self._deliveries) | self._given_up:
            self._registered.clear()
            await self._registered.wait()

    def unregister(self, platform: str) -> None:
        """Remove a platform's delivery port (when it stops)."""
        self._deliveries.pop(platform, None)

    async def recipients(self, user_id: int) -> list[Recipient]:
        """The person's reachable private chats on running platforms: the account they
        chose for check-ins (`/link`) first, then the newest."""
        chats = await reachable_chats(self._sessions, user_id, list(self._deliveries))
        return [
            Recipient(user_id, chat.platform, chat.platform_user_id, chat.chat_id) for chat in chats
        ]

    async def edit(self, platform: str, chat_id: str, message_id: str, reply: Reply) -> bool:
        """Show `reply` in place of an earlier message, on a platform whose delivery port
        can edit; False when it cannot (the platform is not running, or the edit failed)."""
        delivery = self._deliveries.get(platform)
        if not isinstance(delivery, EditingDelivery):
            return False
        try:
            await delivery.edit(chat_id, message_id, reply)
        except DeliveryFailed as exc:
            log.info("outbound.edit_failed", platform=platform, reason=exc.reason)
            return False
        return True

    async def send(self, user_id: int, reply: Reply) -> tuple[Recipient, str]:
        """Deliver to the first reachable chat; `DeliveryFailed` when none takes it."""
        last: DeliveryFailed = DeliveryFailed("unreachable", "no reachable private chat")
        for recipient in await self.recipients(user_id):
            delivery = self._deliveries.get(recipient.platform)
            if delivery is None:  # the platform stopped since the recipients were read
                last = DeliveryFailed("unreachable", f"{recipient.platform} is not running")
                continue
            try:
                message_id = await delivery.send(recipient, reply)
            except DeliveryFailed as exc:
                log.warning("outbound.failed", platform=recipient.platform, reason=exc.reason)
                last = exc
                continue
            return recipient, message_id
        raise last
