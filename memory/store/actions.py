"""Button actions: short opaque tokens that stand for (person, verb, payload).

Platforms limit what a button can carry (Telegram: 64 bytes), and a button's data can be
forged; so a button carries only a random token, resolved here for the person who
pressed it. Someone else's token, an expired one or a used single-use one is unknown.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.tables import ButtonAction, Identity

DEFAULT_TTL = timedelta(days=7)
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,24}")


@dataclass(frozen=True, slots=True)
class Action:
    """What a pressed button means."""

    verb: str
    payload: dict[str, Any]


class SqlActionStore:
    """Issues and resolves button tokens."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def issue_many(
        self,
        user_id: int,
        actions: list[Action],
        *,
        now: datetime,
        ttl: timedelta = DEFAULT_TTL,
        single_use: bool = False,
    ) -> list[str]:
        """One token per action, in order, in one round trip."""
        tokens = [secrets.token_urlsafe(9) for _ in actions]
        async with self._sessions.begin() as db:
            db.add_all(
                ButtonAction(
                    token=token,
                    user_id=user_id,
                    verb=action.verb,
                    payload=action.payload,
                    single_use=single_use,
                    expires_at=now + ttl,
                )
                for token, action in zip(tokens, actions, strict=True)
            )
        return tokens

    async def resolve_account(
        self, platform: str, platform_user_id: str, token: str, *, now: datetime
    ) -> Action | None:
        """The action behind `token` for the person who owns this platform account, or
        None; an account nobody owns (never seen, or erased) resolves nothing and creates
        nobody."""
        owner = (
            select(Identity.user_id)
            .where(Identity.platform == platform, Identity.platform_user_id == platform_user_id)
            .scalar_subquery()
        )
        return await self._take(token, now, ButtonAction.user_id == owner)

    async def _take(self, token: str, now: datetime, owned: ColumnElement[bool]) -> Action | None:
        """Look the token up for its owner, using it up when it is single-use."""
        if not _TOKEN.fullmatch(token):
            return None  # forged: not even the shape of one of ours
        async with self._sessions.begin() as db:
            row = await db.scalar(
                select(ButtonAction)
                .where(ButtonAction.token == token, owned, ButtonAction.expires_at > now)
                .with_for_update()
            )
            if row is None:
                return None
            if row.single_use:
                await db.delete(row)
            return Action(row.verb, dict(row.payload))

    async def purge_expired(self, now: datetime) -> int:
        """Delete expired tokens of everyone; returns how many."""
        async with self._sessions.begin() as db:
            result = await db.execute(delete(ButtonAction).where(ButtonAction.expires_at <= now))
            return int(getattr(result, "rowcount", 0))
