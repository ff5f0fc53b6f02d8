"""The delivery outbox: the state of each proactive message, moved forward in short
transactions so that a crash never sends twice.

    pending ──▶ sending ──▶ sent | failed        (deliver between the two)
       │           └──(crash: lease runs out)──▶ unknown   (never resent)
       └──▶ skipped (a rule, silence, missed)    failed (the model kept failing)

A row is processed by whoever holds its `claim_token`; `merged_into` rows (follow-ups
folded into a check-in) share their primary row's fate. The scheduler claims rows
(`memory.store.claims`) and moves them through these steps.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, DateTime, bindparam, func, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.binary_vector import BinaryVector
from memory.store.tables import Memory, Outreach

FINAL = ("sent", "skipped", "failed", "unknown")


@dataclass(frozen=True, slots=True)
class Claim:
    """A primary outreach row this process now owns (until its lease runs out)."""

    id: int
    user_id: int
    kind: str
    token: str
    due_at: datetime
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class FollowedEvent:
    """A live remembered event an outreach row follows up."""

    content: str
    event_at: datetime


@dataclass(frozen=True, slots=True)
class Delivered:
    """Where a message went."""

    platform: str
    chat_id: str
    platform_message_id: str


def new_token() -> str:
    """A fresh claim token."""
    return secrets.token_hex(8)


def _row_and_merged(outreach_id: int) -> ColumnElement[bool]:
    return or_(Outreach.id == outreach_id, Outreach.merged_into == outreach_id)


_BEGIN_SENDING = text("""
WITH moved AS (
    UPDATE outreach SET status = 'sending', text = :text, lease_until = :lease_until
    WHERE id = :id AND status = 'pending' AND claim_token = :token
    RETURNING id, user_id
), merged AS (
    UPDATE outreach AS o SET status = 'sending' FROM moved AS m
    WHERE o.user_id = m.user_id AND o.merged_into = m.id AND o.status = 'pending'
    RETURNING o.id
)
SELECT count(*) FROM moved
""")


async def begin_sending(
    sessions: async_sessionmaker[AsyncSession], claim: Claim, *, text_: str, lease_until: datetime
) -> bool:
    """pending → sending (with its merged rows), committed before delivery; False when
    the claim was lost to another process."""
    params = {"id": claim.id, "token": claim.token, "text": text_, "lease_until": lease_until}
    async with sessions.begin() as db:
        moved = await db.scalar(_BEGIN_SENDING, params)
    return bool(moved)


async def finish(
    sessions: async_sessionmaker[AsyncSession],
    outreach_id: int,
    *,
    status: str,
    reason: str | None = None,
    error: str | None = None,
) -> None:
    """Close a row (and its merged rows) as skipped or failed, unless already final."""
    async with sessions.begin() as db:
        await db.execute(
            update(Outreach)
            .where(_row_and_merged(outreach_id), Outreach.status.not_in(FINAL))
            .values(status=status, reason=reason, error=error, lease_until=None)
        )


async def release(
    sessions: async_sessionmaker[AsyncSession],
    claim: Claim,
    *,
    until: datetime,
    failed_attempt: bool,
) -> None:
    """Give a pending row back, to be tried again after `until`."""
    async with sessions.begin() as db:
        await db.execute(
            update(Outreach)
            .where(
                Outreach.id == claim.id,
                Outreach.status == "pending",
                Outreach.claim_token == claim.token,
            )
            .values(
                lease_until=until,
                claim_token=None,
                attempts=Outreach.attempts + int(failed_attempt),
            )
        )


# One statement, so atomic without a transaction: the row and its merged rows marked sent,
# the person's open session touched (or, when idle or missing, the idle one closed for
# extraction and a new one opened, as `log_statements.current_session` does), and the
# message kept in that session.
_FINISH_SENT = text("""
WITH sent AS (
    UPDATE outreach SET status = 'sent', reason = NULL, sent_at = :now, platform = :platform,
        platform_message_id = :message_id, lease_until = NULL
    WHERE user_id = :uid AND (id = :id OR merged_into = :id)
      AND status IN ('sending', 'unknown')
    RETURNING id
), open AS (
    SELECT id, last_message_at FROM sessions
    WHERE user_id = :uid AND closed_at IS NULL
    ORDER BY id DESC LIMIT 1
    FOR UPDATE
), touched AS (
    UPDATE sessions AS s SET last_message_at = :now FROM open
    WHERE s.user_id = :uid AND s.id = open.id AND open.last_message_at >= :since
    RETURNING s.id
), closed AS (
    UPDATE sessions AS s SET closed_at = open.last_message_at, extraction_due = true FROM open
    WHERE s.user_id = :uid AND s.id = open.id AND open.last_message_at < :since
    RETURNING s.id
), fresh AS (
    INSERT INTO sessions (user_id, started_at, last_message_at)
    SELECT :uid, :now, :now WHERE NOT EXISTS (SELECT 1 FROM touched)
    RETURNING id
)
INSERT INTO messages (user_id, session_id, role, content, platform, chat_id,
                      platform_message_id, created_at, embedding)
SELECT :uid, coalesce((SELECT id FROM touched), (SELECT id FROM fresh)), 'assistant',
       :content, :platform, :chat_id, :stored_message_id, :now, :embedding
""").bindparams(
    bindparam("embedding", type_=BinaryVector()),
    bindparam("now", type_=DateTime(timezone=True)),
    bindparam("since", type_=DateTime(timezone=True)),
)


async def finish_sent(
    sessions: async_sessionmaker[AsyncSession],
    claim: Claim,
    *,
    delivered: Delivered,
    text_: str,
    embedding: list[float] | None,
    now: datetime,
    idle_gap: timedelta,
) -> None:
    """Mark the row (and merged rows) sent and keep the message in the conversation log,
    in one statement (atomic on its own); a row marked unknown meanwhile is corrected to
    sent."""
    params = {
        "uid": claim.user_id,
        "id": claim.id,
        "now": now,
        "since": now - idle_gap,
        "platform": delivered.platform,
        "message_id": delivered.platform_message_id,
        "chat_id": delivered.chat_id,
        "stored_message_id": delivered.platform_message_id or None,
        "content": text_,
        "embedding": embedding,
    }
    async with sessions.begin() as db:
        await db.execute(_FINISH_SENT, params)


_RECOVER_SENDING = text("""
WITH stale AS (
    UPDATE outreach SET status = 'unknown', reason = 'interrupted', lease_until = NULL
    WHERE status = 'sending' AND merged_into IS NULL AND lease_until < :now
    RETURNING id, kind, user_id
), merged AS (
    UPDATE outreach AS o SET status = 'unknown', reason = 'interrupted' FROM stale AS s
    WHERE o.user_id = s.user_id AND o.merged_into = s.id AND o.status = 'sending'
    RETURNING o.id, o.kind
)
SELECT kind, count(*) AS n FROM (SELECT kind FROM stale UNION ALL SELECT kind FROM merged) AS k
GROUP BY kind
""")

_RECLAIM_PENDING = text("""
UPDATE outreach AS o SET claim_token = :token, lease_until = :lease_until
FROM (
    SELECT id FROM outreach
    WHERE status = 'pending' AND merged_into IS NULL AND lease_until < :now
    ORDER BY lease_until LIMIT :limit
    FOR UPDATE SKIP LOCKED
) AS due
WHERE o.id = due.id
RETURNING o.id, o.user_id, o.kind, o.due_at, o.attempts
""")


async def recover(sessions: async_sessionmaker[AsyncSession], *, now: datetime) -> Counter[str]:
    """Rows left `sending` past their lease (a crash mid-send) become `unknown`: whether
    the person got the message cannot be known, so it is never sent again. How many
    rows (merged ones included), by kind."""
    async with sessions.begin() as db:
        rows = (await db.execute(_RECOVER_SENDING, {"now": now})).all()
    return Counter({row.kind: int(row.n) for row in rows})


async def reclaim_pending(
    sessions: async_sessionmaker[AsyncSession], *, now: datetime, lease: timedelta, limit: int
) -> list[Claim]:
    """Pending rows whose lease ran out (released to retry, or their process died)."""
    token = new_token()
    async with sessions.begin() as db:
        rows = (
            await db.execute(
                _RECLAIM_PENDING,
                {"token": token, "lease_until": now + lease, "now": now, "limit": limit},
            )
        ).all()
    return [Claim(r.id, r.user_id, r.kind, token, r.due_at, r.attempts) for r in rows]


async def merged_counts(
    sessions: async_sessionmaker[AsyncSession], outreach_ids: Sequence[int]
) -> dict[int, Counter[str]]:
    """How many open rows are merged into each of `outreach_ids`, by kind; one query."""
    async with sessions() as db:
        rows = await db.execute(
            select(Outreach.merged_into, Outreach.kind, func.count())
            .where(Outreach.merged_into.in_(list(outreach_ids)), Outreach.status.not_in(FINAL))
            .group_by(Outreach.merged_into, Outreach.kind)
        )
        found: dict[int, Counter[str]] = {}
        for primary, kind, count in rows.all():
            if primary is not None:
                found.setdefault(primary, Counter())[kind] += count
        return found


async def followed_events(
    sessions: async_sessionmaker[AsyncSession], outreach_ids: Sequence[int]
) -> dict[int, list[FollowedEvent]]:
    """The live remembered events each row (and the rows merged into it) follows up, by
    primary row, oldest first; one query for the batch."""
    ids = list(outreach_ids)
    primary = func.coalesce(Outreach.merged_into, Outreach.id)
    async with sessions() as db:
        rows = await db.execute(
            select(primary, Memory.content, Memory.event_at)
            .join(Memory, (Memory.id == Outreach.memory_id) & (Memory.user_id == Outreach.user_id))
            .where(
                or_(Outreach.id.in_(ids), Outreach.merged_into.in_(ids)),
                Memory.valid_until.is_(None),
                Memory.status.in_(("active", "dying")),
                Memory.event_at.is_not(None),
            )
            .order_by(Memory.event_at)
        )
        found: dict[int, list[FollowedEvent]] = {}
        for outreach_id, content, at in rows.all():
            if at is not None:
                found.setdefault(outreach_id, []).append(FollowedEvent(content, at))
        return found
