"""Sending to a person on their own (notices, check-ins): pick their reachable private
chat on a platform that is running, and deliver through that platform's port."""

from __future__ import annotations

import asyncio
from collections.abc import Collection

import structlog
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.delivery import Delivery
from bot.domain import Recipient, Reply
from bot.errors import DeliveryFailed
from memory.store.tables import Identity

log = structlog.get_logger(__name__)


class Outbound:
    """The running platforms' delivery ports, by platform name."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._deliveries: dict[str, Delivery] = {}
        self._registered = asyncio.Event()

    def register(self, delivery: Delivery) -> None:
        """Add a platform's delivery port (adapters do this when they start)."""
        self._deliveries[delivery.platform] = delivery
        self._registered.set()

    async def wait_for(self, platforms: Collection[str]) -> None:
        """Return once every one of `platforms` has registered its delivery port (so
        proactive messages sent at start-up are not failed for want of a platform)."""
        while not set(platforms) <= set(self._deliveries):
            self._registered.clear()
            await self._registered.wait()

    def unregister(self, platform: str) -> None:
        """Remove a platform's delivery port (when it stops)."""
        self._deliveries.pop(platform, None)

    async def recipients(self, user_id: int) -> list[Recipient]:
        """The person's reachable private chats on running platforms: the account they
        chose for check-ins (`/link`) first, then the newest."""
        async with self._sessions() as db:
            rows = await db.scalars(
                select(Identity)
                .where(
                    Identity.user_id == user_id,
                    Identity.reachable,
                    Identity.chat_id.is_not(None),
                    Identity.platform.in_(list(self._deliveries)),
                )
                .order_by(Identity.outreach.desc(), Identity.id.desc())
            )
            return [
                Recipient(user_id, row.platform, row.platform_user_id, row.chat_id or "")
                for row in rows
            ]

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
