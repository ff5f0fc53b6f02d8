"""Session summaries in PostgreSQL: what one is written from, storing it unless something
it was written from was hidden meanwhile, and the summaries erasure marked stale.

A summary covers a session's visible messages up to `summarized_through`; a later one
builds on it (the running summary of a long session, then the one written when it closes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgvector import Vector
from sqlalchemy import exists, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.log_statements import stored_messages
from memory.store.records import StoredMessage
from memory.store.statuses import HIDDEN, UNSHOWN_STATUSES
from memory.store.tables import Message
from memory.store.tables import Session as SessionRow


@dataclass(frozen=True, slots=True)
class SummarySource:
    """A session's summary so far and the visible messages after it, oldest first."""

    earlier: str
    summarized_through: int | None
    messages: list[StoredMessage]


async def summary_source(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    session_id: int,
    limit: int,
    closed_only: bool,
) -> SummarySource | None:
    """The summary so far and the newest `limit` visible messages after it (hidden,
    apology, too-long and command messages never); None when there is no such session
    (or it is still open and `closed_only`)."""
    where = [SessionRow.id == session_id, SessionRow.user_id == user_id]
    if closed_only:
        where.append(SessionRow.closed_at.is_not(None))
    async with sessions() as db:
        found = (
            await db.execute(
                select(SessionRow.summary, SessionRow.summarized_through).where(*where)
            )
        ).first()
        if found is None:
            return None
        query = stored_messages().where(
            Message.user_id == user_id,
            Message.session_id == session_id,
            Message.status.not_in(UNSHOWN_STATUSES),
        )
        if found.summarized_through is not None:
            query = query.where(Message.id > found.summarized_through)
        rows = (await db.execute(query.order_by(Message.id.desc()).limit(limit))).all()
    messages = [StoredMessage(*row) for row in reversed(rows)]
    return SummarySource(found.summary, found.summarized_through, messages)


async def store_summary(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    session_id: int,
    summary: str,
    source: SummarySource,
    vectors: list[Vector] | None = None,
) -> bool:
    """Store the summary, now covering `source`'s messages, unless one of them was hidden
    meanwhile or the summary it built on changed; True when stored. `vectors` are its
    sentences' (`summary_units`), stored with it (None: it has none).

    The session row is locked first: a concurrent erasure either committed before (and
    is seen here) or clears this summary after.
    """
    read_ids = [m.id for m in source.messages]
    async with sessions.begin() as db:
        through = await db.scalar(
            select(SessionRow.summarized_through)
            .where(SessionRow.id == session_id, SessionRow.user_id == user_id)
            .with_for_update()
        )
        hidden = await db.scalar(
            select(
                exists().where(
                    Message.user_id == user_id,
                    Message.id.in_(read_ids),
                    Message.status == HIDDEN,
                )
            )
        )
        if hidden or through != source.summarized_through:
            return False
        await db.execute(
            update(SessionRow)
            .where(SessionRow.id == session_id, SessionRow.user_id == user_id)
            .values(
                summary=summary,
                summarized_through=read_ids[-1],
                summary_stale=False,
                summary_vectors=vectors,
            )
        )
    return True


async def take_stale_summaries(
    sessions: async_sessionmaker[AsyncSession], *, user_ids: Sequence[int]
) -> list[tuple[int, int]]:
    """These people's sessions whose summaries erasure dropped (user id, session id),
    unmarked as they are taken: each is written again once."""
    async with sessions.begin() as db:
        stale = (
            await db.execute(
                update(SessionRow)
                .where(SessionRow.user_id.in_(list(user_ids)), SessionRow.summary_stale)
                .values(summary_stale=False)
                .returning(SessionRow.user_id, SessionRow.id)
            )
        ).all()
    return [(user_id, session_id) for user_id, session_id in stale]
