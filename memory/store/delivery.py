"""Where a person can be reached on the companion's own initiative: their reachable
private chats, read for the delivery of notices and check-ins."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.tables import Identity


@dataclass(frozen=True, slots=True)
class ReachableChat:
    """A private chat of the person on one platform."""

    platform: str
    platform_user_id: str
    chat_id: str


async def reachable_chats(
    sessions: async_sessionmaker[AsyncSession], user_id: int, platforms: Collection[str]
) -> list[ReachableChat]:
    """The person's reachable private chats on `platforms`: the account they chose for
    check-ins (`/link`) first, then the newest."""
    async with sessions() as db:
        rows = await db.execute(
            select(Identity.platform, Identity.platform_user_id, Identity.chat_id)
            .where(
                Identity.user_id == user_id,
                Identity.reachable,
                Identity.chat_id.is_not(None),
                Identity.platform.in_(list(platforms)),
            )
            .order_by(Identity.outreach.desc(), Identity.id.desc())
        )
        return [
            ReachableChat(row.platform, row.platform_user_id, row.chat_id or "") for row in rows
        ]
