"""People and their platform identities and settings, in PostgreSQL.

A person is created on first contact with the identity they wrote from; their settings
(timezone, check-in time, quiet hours, pause, ...) change only through `update_person`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.log_access import LogAccess
from memory.store.log_statements import stored_as, to_person
from memory.store.records import Person
from memory.store.tables import Identity, User


class SqlPeople(LogAccess):
    """People, their identities and their settings."""

    async def ensure_person(
        self,
        *,
        platform: str,
        platform_user_id: str,
        chat_id: str | None,
        display_name: str | None,
        private_chat: bool = True,
    ) -> Person:
        """The person behind a platform account, created on first contact."""
        async with self._sessions.begin() as db:
            user, _ = await resolve_person(
                db, platform, platform_user_id, chat_id if private_chat else None, display_name
            )
            return to_person(user)

    async def update_person(self, user_id: int, **values: Any) -> Person:
        """Change a person's settings (timezone, check-in time, quiet hours, pause, ...);
        setting a timezone makes it known."""
        allowed = {
            "timezone",
            "checkin_time",
            "quiet_start",
            "quiet_end",
            "paused",
            "memory_notices",
            "next_checkin_at",
            "display_name",
            "timezone_known",
            "timezone_asks",
            "timezone_asked_at",
            "timezone_offered",
        }
        unknown = set(values) - allowed
        if unknown:
            raise ValueError(f"not a person setting: {sorted(unknown)}")
        if "timezone" in values:
            values.setdefault("timezone_known", True)
        async with self._sessions.begin() as db:
            row = await db.get_one(User, user_id, with_for_update=True)
            for name, value in values.items():
                setattr(row, name, value)
            await db.flush()
            return to_person(row)

    async def set_reachable(self, *, platform: str, platform_user_id: str, reachable: bool) -> bool:
        """Mark an identity (un)reachable, e.g. when the person blocks or unblocks the bot."""
        async with self._sessions.begin() as db:
            result = await db.execute(
                update(Identity)
                .where(Identity.platform == platform, Identity.platform_user_id == platform_user_id)
                .values(reachable=reachable)
            )
            return bool(getattr(result, "rowcount", 0))

    async def person(self, user_id: int) -> Person | None:
        """A person by id."""
        async with self._sessions() as db:
            row = await db.get(User, user_id)
        return to_person(row) if row is not None else None

    async def persons_by_ids(self, ids: Sequence[int]) -> list[Person]:
        """Several people by id."""
        async with self._sessions() as db:
            rows = (await db.scalars(select(User).where(User.id.in_(ids)))).all()
        return [to_person(row) for row in rows]


async def resolve_person(
    db: AsyncSession,
    platform: str,
    platform_user_id: str,
    chat_id: str | None,
    display_name: str | None,
    *,
    duplicate_of: tuple[str | None, str | None] = (None, None),
) -> tuple[User, int | None]:
    """The person behind the account (created on first contact), with the id of the
    message already stored under `duplicate_of` (chat id, platform message id), if any;
    one statement when the person is known. The identity row stays locked until the
    transaction ends, so one person's messages are stored one at a time."""
    found = (
        await db.execute(
            select(User, Identity.id, Identity.chat_id, stored_as(*duplicate_of))
            .join(Identity, Identity.user_id == User.id)
            .where(Identity.platform == platform, Identity.platform_user_id == platform_user_id)
            .with_for_update(of=Identity)
        )
    ).first()
    if found is not None:
        user, identity_id, known_chat, existing_id = found
        if chat_id is not None and known_chat != chat_id:
            await db.execute(
                update(Identity).where(Identity.id == identity_id).values(chat_id=chat_id)
            )
        return user, existing_id
    return await _create_person(db, platform, platform_user_id, chat_id, display_name)


async def _create_person(
    db: AsyncSession,
    platform: str,
    platform_user_id: str,
    chat_id: str | None,
    display_name: str | None,
) -> tuple[User, None]:
    """A new person with this identity; when another process created it a moment ago,
    theirs."""
    user = User(display_name=(display_name or None) and display_name[:200])
    db.add(user)
    await db.flush()
    inserted = await db.execute(
        insert(Identity)
        .values(
            user_id=user.id,
            platform=platform,
            platform_user_id=platform_user_id,
            chat_id=chat_id,
        )
        .on_conflict_do_nothing(index_elements=["platform", "platform_user_id"])
        .returning(Identity.id)
    )
    if inserted.scalar() is None:
        # Another process created the same person a moment ago: use theirs.
        await db.delete(user)
        winner = await db.scalar(
            select(Identity.user_id).where(
                Identity.platform == platform, Identity.platform_user_id == platform_user_id
            )
        )
        return await db.get_one(User, winner), None
    await db.refresh(user)
    return user, None
