"""One-time link codes and the tries the `/link` rate limits count.

A code is 8 characters from an alphabet without look-alikes (no 0/O, 1/I/L), shown as
`ABCD-EFGH`, valid 10 minutes, used once, and stored only as its SHA-256: the database
never holds a code someone could type. Each account may ask for a few codes an hour and
send a few wrong ones a quarter of an hour; a code refused a few times (sent in a group,
or from the account that asked for it) is void.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.tables import Identity, LinkAttempt, LinkCode

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = timedelta(minutes=10)
ISSUE_LIMIT = 5
ISSUE_WINDOW = timedelta(hours=1)
MISS_LIMIT = 5
MISS_WINDOW = timedelta(minutes=15)
CODE_TRIES = 3
KEEP_USED = timedelta(days=1)
"""How long a code is kept after it ran out (so sending it again says it was used)."""


@dataclass(frozen=True, slots=True)
class Account:
    """A platform account and the person it belongs to."""

    identity_id: int
    user_id: int
    platform: str


@dataclass(frozen=True, slots=True)
class IssuedCode:
    """A code handed out (`code` is None when the account asked too often; then
    `retry_at` says when it may ask again)."""

    code: str | None
    expires_at: datetime | None = None
    retry_at: datetime | None = None


def new_code() -> str:
    """A fresh random code, as people see it: `ABCD-EFGH`."""
    raw = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
    return f"{raw[:4]}-{raw[4:]}"


def normalize_code(text: str) -> str | None:
    """What was typed as the code's canonical form (case, spaces and dashes ignored), or
    None when it cannot be one of ours."""
    raw = "".join(ch for ch in text.upper() if ch not in " -_")
    if len(raw) != CODE_LENGTH or any(ch not in ALPHABET for ch in raw):
        return None
    return raw


def hash_code(canonical: str) -> str:
    """The stored form of a canonical code."""
    return hashlib.sha256(f"companion-link:{canonical}".encode()).hexdigest()


async def lock_account(db: AsyncSession, platform: str, platform_user_id: str) -> Account | None:
    """The account and its person, its identity row locked until the transaction ends
    (as the inbound path locks it: the account's messages wait for the link)."""
    row = (
        await db.execute(
            select(Identity.id, Identity.user_id, Identity.platform)
            .where(Identity.platform == platform, Identity.platform_user_id == platform_user_id)
            .with_for_update()
        )
    ).first()
    return Account(row.id, row.user_id, row.platform) if row is not None else None


async def recent_tries(db: AsyncSession, account: Account, kind: str, since: datetime) -> int:
    """How many tries of `kind` ('issue' or 'miss') the account made since `since`."""
    count = await db.scalar(
        select(func.count()).where(
            LinkAttempt.identity_id == account.identity_id,
            LinkAttempt.kind == kind,
            LinkAttempt.created_at > since,
        )
    )
    return int(count or 0)


async def record_try(db: AsyncSession, account: Account, kind: str, now: datetime) -> None:
    """Count one try of the account, and forget everyone's tries too old to count and
    codes a day past their end (the tables stay as small as the last hour's linking)."""
    await db.execute(
        delete(LinkAttempt).where(LinkAttempt.created_at <= now - max(ISSUE_WINDOW, MISS_WINDOW))
    )
    await db.execute(delete(LinkCode).where(LinkCode.expires_at <= now - KEEP_USED))
    db.add(
        LinkAttempt(
            user_id=account.user_id, identity_id=account.identity_id, kind=kind, created_at=now
        )
    )


async def retry_after(db: AsyncSession, account: Account, kind: str, now: datetime) -> datetime:
    """When the oldest try still counted in the window of `kind` stops counting."""
    window = ISSUE_WINDOW if kind == "issue" else MISS_WINDOW
    oldest = await db.scalar(
        select(func.min(LinkAttempt.created_at)).where(
            LinkAttempt.identity_id == account.identity_id,
            LinkAttempt.kind == kind,
            LinkAttempt.created_at > now - window,
        )
    )
    return (oldest or now) + window


async def issue_code(
    sessions: async_sessionmaker[AsyncSession],
    *,
    platform: str,
    platform_user_id: str,
    now: datetime,
) -> IssuedCode:
    """A new code for this account (its earlier unused ones are void from now on), or
    when to ask again if it asked too often."""
    async with sessions.begin() as db:
        account = await lock_account(db, platform, platform_user_id)
        if account is None:
            raise LookupError("the account has no person yet")
        if await recent_tries(db, account, "issue", now - ISSUE_WINDOW) >= ISSUE_LIMIT:
            return IssuedCode(None, retry_at=await retry_after(db, account, "issue", now))
        await db.execute(
            delete(LinkCode).where(
                LinkCode.identity_id == account.identity_id, LinkCode.used_at.is_(None)
            )
        )
        code = new_code()
        db.add(
            LinkCode(
                user_id=account.user_id,
                identity_id=account.identity_id,
                code_hash=hash_code(code.replace("-", "")),
                created_at=now,
                expires_at=now + CODE_TTL,
            )
        )
        await record_try(db, account, "issue", now)
    return IssuedCode(code, expires_at=now + CODE_TTL)


async def find_code(db: AsyncSession, canonical: str) -> LinkCode | None:
    """The code's row, locked (two accounts sending it at once cannot both use it)."""
    return await db.scalar(
        select(LinkCode).where(LinkCode.code_hash == hash_code(canonical)).with_for_update()
    )


async def void_code(sessions: async_sessionmaker[AsyncSession], *, text: str) -> bool:
    """Make a code unusable (it was shown where others could read it); True if it was
    a live code."""
    canonical = normalize_code(text)
    if canonical is None:
        return False
    async with sessions.begin() as db:
        result = await db.execute(
            update(LinkCode)
            .where(LinkCode.code_hash == hash_code(canonical), LinkCode.used_at.is_(None))
            .values(tries=CODE_TRIES)
        )
    return bool(getattr(result, "rowcount", 0))
