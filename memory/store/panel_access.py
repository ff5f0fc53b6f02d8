"""Who may open the memory panel: one-time sign-ins (by the SHA-256 of what was
presented, so a replay fails in every process) and the panel's sessions.

Nothing here knows a secret or a token: callers pass digests, and a digest is the only
key. Every sign-in and session belongs to exactly one person.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.tables import Identity, PanelLink, PanelSession

KEEP_USED = timedelta(days=1)  # used sign-ins are kept past their expiry, then swept


@dataclass(frozen=True, slots=True)
class PanelGrant:
    """A signed-in panel: whose it is and the CSRF token its changes must carry."""

    user_id: int
    csrf: str


class SqlPanelAccess:
    """Sign-ins and sessions of the memory panel in PostgreSQL."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def issue_link(
        self, *, user_id: int, digest: str, expires_at: datetime, now: datetime
    ) -> None:
        """Record a one-time link for `user_id` (and sweep long-expired ones)."""
        async with self._sessions.begin() as db:
            await _sweep(db, now)
            db.add(PanelLink(digest=digest, user_id=user_id, kind="link", expires_at=expires_at))

    async def redeem_link(self, *, digest: str, now: datetime) -> int | None:
        """The person a one-time link was issued to, marking it used; None when it is
        unknown, expired or already used (in this process or another)."""
        async with self._sessions.begin() as db:
            user_id = await db.scalar(
                update(PanelLink)
                .where(
                    PanelLink.digest == digest,
                    PanelLink.kind == "link",
                    PanelLink.used_at.is_(None),
                    PanelLink.expires_at > now,
                )
                .values(used_at=now)
                .returning(PanelLink.user_id)
            )
        return int(user_id) if user_id is not None else None

    async def use_once(
        self, *, user_id: int, digest: str, expires_at: datetime, now: datetime
    ) -> bool:
        """Record a Telegram sign-in as used; False when it was used before."""
        async with self._sessions.begin() as db:
            inserted = await db.scalar(
                insert(PanelLink)
                .values(
                    digest=digest,
                    user_id=user_id,
                    kind="telegram",
                    expires_at=expires_at,
                    used_at=now,
                )
                .on_conflict_do_nothing(index_elements=[PanelLink.digest])
                .returning(PanelLink.digest)
            )
        return inserted is not None

    async def person_of(self, platform: str, platform_user_id: str) -> int | None:
        """The person behind a platform account, if they have ever written."""
        async with self._sessions() as db:
            found = await db.scalar(
                select(Identity.user_id).where(
                    Identity.platform == platform, Identity.platform_user_id == platform_user_id
                )
            )
        return int(found) if found is not None else None

    async def open_session(
        self, *, user_id: int, digest: str, csrf: str, expires_at: datetime, now: datetime
    ) -> None:
        """Start a panel session for `user_id` (and sweep long-expired sign-ins)."""
        async with self._sessions.begin() as db:
            await _sweep(db, now)
            db.add(PanelSession(digest=digest, user_id=user_id, csrf=csrf, expires_at=expires_at))

    async def session(self, *, digest: str, now: datetime) -> PanelGrant | None:
        """The session with this digest, while it lasts."""
        async with self._sessions() as db:
            found = (
                await db.execute(
                    select(PanelSession.user_id, PanelSession.csrf).where(
                        PanelSession.digest == digest, PanelSession.expires_at > now
                    )
                )
            ).first()
        return PanelGrant(int(found[0]), str(found[1])) if found is not None else None

    async def close_session(self, *, digest: str) -> None:
        """End a panel session."""
        async with self._sessions.begin() as db:
            await db.execute(delete(PanelSession).where(PanelSession.digest == digest))


async def _sweep(db: AsyncSession, now: datetime) -> None:
    """Drop sign-ins and sessions long past their expiry."""
    await db.execute(delete(PanelLink).where(PanelLink.expires_at < now - KEEP_USED))
    await db.execute(delete(PanelSession).where(PanelSession.expires_at < now))
