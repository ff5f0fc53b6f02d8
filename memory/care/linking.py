"""Linking accounts into one person (`/link CODE`), and taking one out again (`/unlink`).

Redeeming a code is one transaction: the account's tries are checked, the code is found
and used up, the two people are joined (`memory.care.joining`) and their memories
reconciled (`memory.care.link_memories`). Anything refused leaves everything as it was
except the count of wrong tries, which is what rate-limits guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import structlog
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.care.joining import SETTINGS, join_people, lock_people
from memory.care.link_memories import Conflict, Reconciled, reconcile_moved
from memory.store.link_codes import (
    CODE_TRIES,
    MISS_LIMIT,
    MISS_WINDOW,
    Account,
    find_code,
    lock_account,
    normalize_code,
    recent_tries,
    record_try,
    retry_after,
)
from memory.store.tables import Identity, LinkCode, User

log = structlog.get_logger(__name__)


class Refusal(StrEnum):
    """Why a code did not link anything."""

    WRONG = "wrong"
    EXPIRED = "expired"
    VOID = "void"
    """Refused too often, or shown in a group."""
    USED = "used"
    TOO_MANY = "too_many"
    OWN = "own"
    """The code was sent from an account of the person who asked for it."""
    SAME_PLATFORM = "same_platform"


@dataclass(frozen=True, slots=True)
class Linked:
    """Two people joined: who stays, the platforms now linked, what the memories did,
    and the joined account's settings (to offer instead of the older account's)."""

    user_id: int
    platforms: tuple[str, ...]
    other_platform: str
    merged: int
    moved: int
    conflicts: tuple[Conflict, ...]
    other_settings: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NotLinked:
    """A refused code; `retry_at` is set when the account must wait."""

    reason: Refusal
    retry_at: datetime | None = None


async def redeem_code(
    sessions: async_sessionmaker[AsyncSession],
    *,
    platform: str,
    platform_user_id: str,
    code: str,
    now: datetime,
) -> Linked | NotLinked:
    """Link the account that sent `code` with the account that asked for it."""
    async with sessions.begin() as db:
        account = await lock_account(db, platform, platform_user_id)
        if account is None:
            raise LookupError("the account has no person yet")
        if await recent_tries(db, account, "miss", now - MISS_WINDOW) >= MISS_LIMIT:
            return NotLinked(Refusal.TOO_MANY, await retry_after(db, account, "miss", now))
        canonical = normalize_code(code)
        row = await find_code(db, canonical) if canonical is not None else None
        refusal = await _refusal(db, row, account, now)
        if refusal is not None or row is None:
            await record_try(db, account, "miss", now)
            log.info("link.refused", platform=platform, reason=str(refusal))
            return NotLinked(refusal or Refusal.WRONG)
        row.used_at = now
        await db.flush()
        issuer = await db.get_one(Identity, row.identity_id)
        linked = await _join(db, issuer, account, now)
    log.info("link.linked", user_id=linked.user_id, merged=linked.merged, moved=linked.moved)
    return linked


async def _refusal(
    db: AsyncSession, row: LinkCode | None, account: Account, now: datetime
) -> Refusal | None:
    """Why this code cannot link this account, if it cannot (a refused use of a live code
    counts against the code)."""
    if row is None:
        return Refusal.WRONG
    if row.used_at is not None:
        return Refusal.USED
    if row.tries >= CODE_TRIES:
        return Refusal.VOID
    if row.expires_at <= now:
        return Refusal.EXPIRED
    issuer = await db.get_one(Identity, row.identity_id)
    refusal = None
    if row.user_id == account.user_id:
        refusal = Refusal.OWN
    elif issuer.platform == account.platform:
        refusal = Refusal.SAME_PLATFORM
    if refusal is not None:
        row.tries += 1
    return refusal


async def _join(db: AsyncSession, issuer: Identity, account: Account, now: datetime) -> Linked:
    """Join the code's person and the account's person, the older one staying."""
    keeper, other = await lock_people(db, [issuer.user_id, account.user_id])
    joined = await join_people(db, keeper=keeper, other=other, now=now)
    reconciled = (
        await reconcile_moved(db, user_id=keeper.id, moved_from=joined.moved_from, now=now)
        if joined.moved_memory_ids
        else Reconciled(0, ())
    )
    platforms = tuple(
        await db.scalars(
            select(Identity.platform)
            .where(Identity.user_id == keeper.id)
            .distinct()
            .order_by(Identity.platform)
        )
    )
    other_platform = account.platform if account.user_id == other.id else issuer.platform
    return Linked(
        user_id=keeper.id,
        platforms=platforms,
        other_platform=other_platform,
        merged=reconciled.merged,
        moved=len(joined.moved_memory_ids),
        conflicts=reconciled.conflicts,
        other_settings=joined.other_settings,
    )


async def choose_outreach(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, platform: str
) -> bool:
    """Send the person's check-ins (and everything else the companion starts) to their
    account on `platform`; False when they have none there."""
    async with sessions.begin() as db:
        target = await db.scalar(
            select(Identity.id)
            .where(Identity.user_id == user_id, Identity.platform == platform)
            .order_by(Identity.id.desc())
            .limit(1)
        )
        if target is None:
            return False
        await db.execute(
            update(Identity)
            .where(Identity.user_id == user_id)
            .values(outreach=Identity.id == target)
            .execution_options(synchronize_session=False)
        )
    return True


async def linked_platforms(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int
) -> list[tuple[str, bool]]:
    """The person's accounts' platforms, each with whether check-ins go there."""
    async with sessions() as db:
        rows = await db.execute(
            select(Identity.platform, Identity.outreach)
            .where(Identity.user_id == user_id)
            .order_by(Identity.id)
        )
        return [(row.platform, row.outreach) for row in rows]


async def unlink_account(
    sessions: async_sessionmaker[AsyncSession],
    *,
    platform: str,
    platform_user_id: str,
    now: datetime,
) -> int | None:
    """Take this account out of its person into a new person of its own (with the same
    settings, and nothing remembered); the new person's id, or None when the account is
    the person's only one. Messages, sessions and memories stay with the person."""
    async with sessions.begin() as db:
        account = await lock_account(db, platform, platform_user_id)
        if account is None:
            return None
        [person] = await lock_people(db, [account.user_id])
        others = await db.scalar(
            select(Identity.id)
            .where(Identity.user_id == person.id, Identity.id != account.identity_id)
            .order_by(Identity.outreach.desc(), Identity.id.desc())
            .limit(1)
        )
        if others is None:
            return None
        fresh = User(
            display_name=person.display_name, **{name: getattr(person, name) for name in SETTINGS}
        )
        fresh.next_checkin_at = person.next_checkin_at
        db.add(fresh)
        await db.flush()
        await db.execute(
            update(Identity)
            .where(Identity.id == account.identity_id)
            .values(user_id=fresh.id, outreach=False)
        )
        await db.execute(update(Identity).where(Identity.id == others).values(outreach=True))
    log.info("link.unlinked", user_id=account.user_id, new_user_id=fresh.id, platform=platform)
    return fresh.id
