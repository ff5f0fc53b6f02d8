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

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.tables import ButtonAction

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

    async def resolve(self, user_id: int, token: str, *, now: datetime) -> Action | None:
        """The action behind `token` for this person, or None (unknown, expired, used)."""
        if not _TOKEN.fullmatch(token):
            return None  # forged: not even the shape of one of ours
        async with self._sessions.begin() as db:
            row = await db.scalar(
                select(ButtonAction)
                .where(
                    ButtonAction.token == token,
                    ButtonAction.user_id == user_id,
                    ButtonAction.expires_at > now,
                )
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
