"""Erasing what a person asked to forget: the words behind a forgotten memory (hidden at
once, erased for good when the trash is purged), and everything about a person
(`/forget all`).

The words behind a memory are its source messages, the companion's reply right after
each (a command has none: it was answered outside the conversation), and the follow-ups
the companion sent about it; a thread's title may repeat them too. A command's message
(`memory.care.provenance`) is never shown, so hiding leaves it as it is; the purge erases it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.coordination import forget_accounts
from memory.store.statuses import COMMAND, HIDDEN
from memory.store.tables import (
    Base,
    DiaryEntry,
    Identity,
    Memory,
    Message,
    Outreach,
    Session,
    Thread,
    User,
)

_RELATED_MESSAGES = text("""
WITH src AS (
    SELECT m.user_id, unnest(m.source_message_ids) AS id
    FROM memories AS m WHERE m.id = ANY(CAST(:memory_ids AS bigint[]))
    UNION
    SELECT CAST(:user_id AS bigint), unnest(CAST(:message_ids AS bigint[]))
),
said AS (
    SELECT s.id, s.user_id, s.session_id, s.status
    FROM messages AS s JOIN src USING (user_id, id)
),
replies AS (
    SELECT r.id, r.role FROM said
    CROSS JOIN LATERAL (
        SELECT n.id, n.role FROM messages AS n
        WHERE n.user_id = said.user_id AND n.session_id = said.session_id AND n.id > said.id
        ORDER BY n.id LIMIT 1
    ) AS r
    WHERE said.status <> 'command'
),
followups AS (
    SELECT f.id FROM memories AS m
    JOIN outreach AS o ON o.user_id = m.user_id AND o.memory_id = m.id
    JOIN messages AS f
      ON f.user_id = o.user_id AND f.platform = o.platform
     AND f.platform_message_id = o.platform_message_id AND f.created_at = o.sent_at
    WHERE m.id = ANY(CAST(:memory_ids AS bigint[]))
      AND o.status = 'sent' AND f.role = 'assistant'
)
SELECT id FROM said
UNION SELECT id FROM replies WHERE role = 'assistant'
UNION SELECT id FROM followups
""")


async def related_messages(
    db: AsyncSession,
    *,
    memory_ids: Sequence[int] = (),
    user_id: int | None = None,
    message_ids: Sequence[int] = (),
) -> set[int]:
    """The words behind these memories (and behind these messages of `user_id`): the
    messages themselves, the companion's reply right after each, and follow-ups."""
    if not memory_ids and not message_ids:
        return set()
    rows = await db.execute(
        _RELATED_MESSAGES,
        {"memory_ids": list(memory_ids), "user_id": user_id, "message_ids": list(message_ids)},
    )
    return {int(row[0]) for row in rows}


async def still_forgotten_messages(
    db: AsyncSession, *, user_ids: Sequence[int], except_memory_ids: Sequence[int] = ()
) -> set[int]:
    """Messages that must stay hidden because another forgotten memory came from them."""
    others = select(Memory.id).where(
        Memory.user_id.in_(user_ids),
        Memory.status == "forgotten",
        Memory.id.not_in(except_memory_ids),
    )
    return await related_messages(db, memory_ids=list(await db.scalars(others)))


async def hide_messages(db: AsyncSession, *, user_id: int, message_ids: Sequence[int]) -> int:
    """Hide messages from prompts, recall and the diary, and drop the summaries of their
    sessions (which may repeat them; the patrol writes closed ones again without them);
    in the caller's transaction."""
    if not message_ids:
        return 0
    sessions = await db.scalars(
        update(Message)
        .where(
            Message.user_id == user_id,
            Message.id.in_(message_ids),
            Message.status != COMMAND,  # never shown, never summarised: nothing to hide
        )
        .values(status=HIDDEN)
        .returning(Message.session_id)
    )
    await _drop_summaries(db, user_id=user_id, session_ids=set(sessions))
    return len(message_ids)


async def _drop_summaries(db: AsyncSession, *, user_id: int, session_ids: set[int]) -> None:
    """Drop the summaries of these sessions (they may repeat words now hidden, or lack
    words shown again); a closed one is marked for the patrol to write again."""
    if session_ids:
        await db.execute(
            update(Session)
            .where(Session.user_id == user_id, Session.id.in_(session_ids))
            .values(
                summary="",
                summarized_through=None,
                summary_stale=Session.closed_at.is_not(None),
                summary_vectors=None,
            )
        )


async def unhide_messages(db: AsyncSession, *, user_id: int, message_ids: Sequence[int]) -> None:
    """Show hidden messages again (their memory was restored), except those another
    forgotten memory still needs hidden; their sessions' summaries are written again."""
    keep_hidden = await still_forgotten_messages(db, user_ids=[user_id])
    shown = [m for m in message_ids if m not in keep_hidden]
    if shown:
        sessions = await db.scalars(
            update(Message)
            .where(Message.user_id == user_id, Message.id.in_(shown), Message.status == HIDDEN)
            .values(status="answered")
            .returning(Message.session_id)
        )
        await _drop_summaries(db, user_id=user_id, session_ids=set(sessions))


async def erase_messages(
    db: AsyncSession, *, user_ids: Sequence[int], message_ids: Sequence[int]
) -> int:
    """Erase the words of these people's hidden messages for good (content, embedding
    and so the search vector), and empty the diary entries written from them; the rows
    stay as hidden placeholders, so what was written from them stays withdrawn."""
    if not message_ids:
        return 0
    ids, people = list(message_ids), list(user_ids)
    result = await db.execute(
        update(Message)
        .where(
            Message.user_id.in_(people),
            Message.id.in_(ids),
            Message.status.in_((HIDDEN, COMMAND)),
        )
        .values(content="", embedding=None)
    )
    await db.execute(
        update(DiaryEntry)
        .where(DiaryEntry.user_id.in_(people), DiaryEntry.source_message_ids.overlap(ids))
        .values(lines=[], notes_to_self=[])
    )
    return int(getattr(result, "rowcount", 0) or 0)


async def erase_followup_texts(
    db: AsyncSession, *, user_ids: Sequence[int], memory_ids: Sequence[int]
) -> None:
    """Erase the text kept in these people's outbox of follow-ups about these memories,
    and unlink them (the memories are about to be deleted)."""
    if memory_ids:
        await db.execute(
            update(Outreach)
            .where(Outreach.user_id.in_(list(user_ids)), Outreach.memory_id.in_(list(memory_ids)))
            .values(text=None, memory_id=None)
        )


async def erase_thread_titles(
    db: AsyncSession, *, user_ids: Sequence[int], memory_ids: Sequence[int]
) -> None:
    """Withdraw for good the threads these memories were filed under, and erase their
    titles (a title may repeat a forgotten memory's words)."""
    if memory_ids:
        filed = select(Memory.thread_id).where(
            Memory.user_id.in_(list(user_ids)),
            Memory.id.in_(list(memory_ids)),
            Memory.thread_id.is_not(None),
        )
        await db.execute(
            update(Thread)
            .where(Thread.user_id.in_(list(user_ids)), Thread.id.in_(filed))
            .values(status="withdrawn", title="")
        )


async def hide_sources(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, message_ids: Sequence[int]
) -> int:
    """Hide these messages of the person and the companion's replies right after them."""
    async with sessions.begin() as db:
        hidden = await related_messages(db, user_id=user_id, message_ids=message_ids)
        return await hide_messages(db, user_id=user_id, message_ids=sorted(hidden))


def person_tables() -> list[str]:
    """Every table that holds rows of a person (by a `user_id` column)."""
    return sorted(t.name for t in Base.metadata.sorted_tables if "user_id" in t.c)


async def count_person_data(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int
) -> dict[str, int]:
    """How many rows of this person each table holds."""
    counts: dict[str, int] = {}
    async with sessions() as db:
        for name in person_tables():
            table = Base.metadata.tables[name]
            query = select(func.count()).select_from(table).where(table.c.user_id == user_id)
            counts[name] = int(await db.scalar(query) or 0)
    return counts


async def erase_person(sessions: async_sessionmaker[AsyncSession], *, user_id: int) -> None:
    """Delete the person and, by cascade, every row of theirs in every table, and the
    coordination rows keyed by their platform accounts."""
    async with sessions.begin() as db:
        accounts = await db.execute(
            select(Identity.platform, Identity.platform_user_id).where(Identity.user_id == user_id)
        )
        await forget_accounts(db, [(platform, account) for platform, account in accounts])
        for name in person_tables():
            table = Base.metadata.tables[name]
            await db.execute(delete(table).where(table.c.user_id == user_id))
        await db.execute(delete(User).where(User.id == user_id))
