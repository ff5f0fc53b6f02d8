"""Imported chat history in PostgreSQL: storing an export's messages (their original
dates and authors, in closed sessions of their own, marked with the import), choosing
whose words are the person's, the import's progress, and undoing it whole.

Imported messages are history for recall and extraction, never live conversation: their
sessions are closed from the start and carry `import_id`, which keeps them out of the
recent past, the idle sweep and the ordinary extraction queue.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, bindparam, case, delete, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.tables import Import, Message
from memory.store.tables import Session as SessionRow

IMPORT_PLATFORM = "import"
SESSION_GAP = timedelta(hours=6)
"""A pause this long in an old chat starts a new session (as a live idle gap would)."""
OTHER_ROLE = "other"
"""The role of another participant's words: context, never the person's nor the
companion's."""
MAX_FAILED_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class ImportLine:
    """One message to store: its author's name, text, original time and conversation."""

    author: str
    text: str
    sent_at: datetime
    conversation: str | None = None


@dataclass(frozen=True, slots=True)
class Participant:
    """Someone who wrote in an export, and how many of its messages are theirs."""

    name: str
    messages: int


@dataclass(frozen=True, slots=True)
class ImportView:
    """An import as the person sees it."""

    id: int
    user_id: int
    source: str
    status: str
    self_name: str | None
    participants: tuple[Participant, ...]
    message_count: int
    extracted_count: int
    first_at: datetime | None
    last_at: datetime | None
    sessions: int = 0
    chars: int = 0
    progress_platform: str | None = None
    progress_chat_id: str | None = None
    progress_message_id: str | None = None


@dataclass(frozen=True, slots=True)
class UndoneImport:
    """What undoing an import removed."""

    messages: int
    memories: int


@dataclass
class _Tally:
    """What the stored stream held, counted as it went by."""

    count: int = 0
    chars: int = 0
    sessions: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    authors: dict[str, int] = field(default_factory=dict)

    def add(self, line: ImportLine) -> None:
        self.count += 1
        self.chars += len(line.text)
        self.authors[line.author] = self.authors.get(line.author, 0) + 1
        self.first_at = line.sent_at if self.first_at is None else min(self.first_at, line.sent_at)
        self.last_at = line.sent_at if self.last_at is None else max(self.last_at, line.sent_at)


async def store_import(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    source_of: Callable[[], str],
    chunks: AsyncIterator[Sequence[ImportLine]],
    now: datetime,
) -> ImportView:
    """Store every message `chunks` yields as a pending import of the person's, in one
    transaction: an error anywhere (a truncated file found at its end) stores nothing.
    Every message is stored as another participant's until `choose_self`; `source_of`
    names the format once the stream is read (it is known only as the file is)."""
    tally = _Tally()
    async with sessions.begin() as db:
        import_id = await db.scalar(
            insert(Import).values(user_id=user_id, source="text").returning(Import.id)
        )
        assert import_id is not None
        state = _Sessions(db, user_id, import_id)
        async for chunk in chunks:
            rows = []
            for line in chunk:
                session_id = await state.session_for(line)
                tally.add(line)
                rows.append(_row(user_id, import_id, session_id, line))
            if rows:
                await db.execute(insert(Message), rows)
        await state.close_last()
        tally.sessions = state.count
        participants = [
            {"name": name, "messages": count}
            for name, count in sorted(tally.authors.items(), key=lambda kv: -kv[1])
        ]
        await db.execute(
            update(Import)
            .where(Import.id == import_id)
            .values(
                source=source_of(),
                participants=participants,
                message_count=tally.count,
                first_at=tally.first_at,
                last_at=tally.last_at,
                created_at=now,
            )
        )
    view = await get_import(sessions, user_id=user_id, import_id=import_id)
    assert view is not None
    return _with_counts(view, tally)


def _with_counts(view: ImportView, tally: _Tally) -> ImportView:
    return replace(view, sessions=tally.sessions, chars=tally.chars)


def _row(user_id: int, import_id: int, session_id: int, line: ImportLine) -> dict[str, Any]:
    return {
        "user_id": user_id,
        "session_id": session_id,
        "role": OTHER_ROLE,
        "content": line.text,
        "platform": IMPORT_PLATFORM,
        "status": "stored",
        "created_at": line.sent_at,
        "import_id": import_id,
        "author": line.author,
    }


class _Sessions:
    """Opens a new closed session at a conversation change or a long pause."""

    def __init__(self, db: AsyncSession, user_id: int, import_id: int) -> None:
        self._db = db
        self._user_id = user_id
        self._import_id = import_id
        self._current: int | None = None
        self._started: datetime | None = None
        self._last: datetime | None = None
        self._conversation: str | None = None
        self.count = 0

    async def session_for(self, line: ImportLine) -> int:
        fresh = (
            self._current is None
            or line.conversation != self._conversation
            or (self._last is not None and line.sent_at - self._last > SESSION_GAP)
        )
        if fresh:
            await self.close_last()
            self._current = await self._db.scalar(
                insert(SessionRow)
                .values(
                    user_id=self._user_id,
                    started_at=line.sent_at,
                    last_message_at=line.sent_at,
                    closed_at=line.sent_at,
                    import_id=self._import_id,
                )
                .returning(SessionRow.id)
            )
            self._started, self._conversation = line.sent_at, line.conversation
            self.count += 1
        self._last = line.sent_at if self._last is None or fresh else max(self._last, line.sent_at)
        assert self._current is not None
        return self._current

    async def close_last(self) -> None:
        if self._current is None or self._last is None:
            return
        await self._db.execute(
            update(SessionRow)
            .where(SessionRow.id == self._current)
            .values(last_message_at=self._last, closed_at=self._last)
        )


async def get_import(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, import_id: int
) -> ImportView | None:
    """One of the person's imports; None when it is not theirs or gone."""
    async with sessions() as db:
        row = await db.scalar(
            select(Import).where(Import.id == import_id, Import.user_id == user_id)
        )
        return _view(row) if row is not None else None


async def latest_import(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int
) -> ImportView | None:
    """The person's most recent import, if any."""
    async with sessions() as db:
        row = await db.scalar(
            select(Import).where(Import.user_id == user_id).order_by(Import.id.desc()).limit(1)
        )
        return _view(row) if row is not None else None


def _view(row: Import) -> ImportView:
    return ImportView(
        id=row.id,
        user_id=row.user_id,
        source=row.source,
        status=row.status,
        self_name=row.self_name,
        participants=tuple(
            Participant(str(p["name"]), int(p["messages"])) for p in row.participants
        ),
        message_count=row.message_count,
        extracted_count=row.extracted_count,
        first_at=row.first_at,
        last_at=row.last_at,
        progress_platform=row.progress_platform,
        progress_chat_id=row.progress_chat_id,
        progress_message_id=row.progress_message_id,
    )


async def choose_self(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, import_id: int, name: str
) -> bool:
    """Make `name`'s messages the person's own words (everyone else's stay context);
    False when the import is not the person's pending one or nobody has that name."""
    async with sessions.begin() as db:
        found = await db.scalar(
            _pending(user_id, import_id, Import.participants.contains([{"name": name}]))
            .values(self_name=name)
            .returning(Import.id)
        )
        if found is None:
            return False
        await db.execute(
            update(Message)
            .where(Message.import_id == import_id, Message.user_id == user_id)
            .values(role=case((Message.author == name, "user"), else_=OTHER_ROLE))
        )
    return True


async def start_import(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    import_id: int,
    now: datetime,
    progress: tuple[str, str, str] | None = None,
) -> bool:
    """Let background extraction begin (the person chose who they are); `progress` is
    the (platform, chat, message) to keep updated. False when it cannot start."""
    values: dict[str, Any] = {"status": "running", "started_at": now}
    if progress is not None:
        values |= dict(
            zip(
                ("progress_platform", "progress_chat_id", "progress_message_id"),
                progress,
                strict=True,
            )
        )
    async with sessions.begin() as db:
        found = await db.scalar(
            _pending(user_id, import_id, Import.self_name.is_not(None))
            .values(**values)
            .returning(Import.id)
        )
    return found is not None


def _pending(user_id: int, import_id: int, condition: Any) -> Any:
    """An update of the person's import while it is still pending and `condition` holds."""
    return update(Import).where(
        Import.id == import_id,
        Import.user_id == user_id,
        Import.status == "pending",
        condition,
    )


async def expire_pending_imports(
    sessions: async_sessionmaker[AsyncSession], *, created_before: datetime
) -> int:
    """Delete imports still waiting for the person (who they are, or Start) since before
    `created_before`, with their messages and sessions: nothing was learned from them,
    and words nobody asked to keep are not kept. How many were deleted."""
    async with sessions.begin() as db:
        deleted = await db.scalars(
            delete(Import)
            .where(Import.status == "pending", Import.created_at < created_before)
            .returning(Import.id)
        )
        return len(deleted.all())


async def running_imports(
    sessions: async_sessionmaker[AsyncSession], *, limit: int = 20
) -> list[ImportView]:
    """Imports whose extraction is under way, oldest first."""
    async with sessions() as db:
        rows = await db.scalars(
            select(Import).where(Import.status == "running").order_by(Import.id).limit(limit)
        )
        return [_view(row) for row in rows]


async def next_session(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, import_id: int
) -> int | None:
    """The import's first session with messages past its extraction watermark (and not
    failing over and over); None when every one is read."""
    unread = (
        select(Message.id)
        .where(
            Message.session_id == SessionRow.id,
            Message.id > func.coalesce(SessionRow.extracted_through, 0),
        )
        .exists()
    )
    async with sessions() as db:
        return await db.scalar(
            select(SessionRow.id)
            .where(
                SessionRow.import_id == import_id,
                SessionRow.user_id == user_id,
                SessionRow.extraction_attempts < MAX_FAILED_ATTEMPTS,
                unread,
            )
            .order_by(SessionRow.id)
            .limit(1)
        )


async def record_progress(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    import_id: int,
    now: datetime,
    finished: bool,
) -> ImportView | None:
    """Count the messages extraction has read; `finished` marks the import done."""
    read = (
        select(func.count(Message.id))
        .join(SessionRow, SessionRow.id == Message.session_id)
        .where(
            SessionRow.import_id == import_id,
            Message.id <= func.coalesce(SessionRow.extracted_through, 0),
        )
        .scalar_subquery()
    )
    values: dict[str, Any] = {"extracted_count": read}
    if finished:
        values |= {"status": "done", "finished_at": now}
    async with sessions.begin() as db:
        await db.execute(
            update(Import)
            .where(Import.id == import_id, Import.user_id == user_id, Import.status == "running")
            .values(**values)
        )
    return await get_import(sessions, user_id=user_id, import_id=import_id)


_CREATED = """
SELECT m.id, m.valid_until IS NULL AS live FROM memories AS m
WHERE m.user_id = :uid AND m.source_message_ids && ARRAY(
    SELECT id FROM messages WHERE import_id = :iid AND user_id = :uid AND role = 'user'
)
"""


async def undo_import(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, import_id: int
) -> UndoneImport | None:
    """Remove the import, its messages and every memory made from its words, in one
    transaction; a memory one of them replaced is live again. None when not theirs."""
    params = {"uid": user_id, "iid": import_id}
    async with sessions.begin() as db:
        owned = await db.scalar(
            select(Import.message_count)
            .where(Import.id == import_id, Import.user_id == user_id)
            .with_for_update()
        )
        if owned is None:
            return None
        # A batch storing what it learned holds its session's lock: wait for it, so its
        # memories are among those removed (a batch that comes later finds no session).
        await db.execute(
            select(SessionRow.id)
            .where(SessionRow.import_id == import_id, SessionRow.user_id == user_id)
            .with_for_update()
        )
        created = (await db.execute(text(_CREATED), params)).all()
        ids = [int(row.id) for row in created]
        live = [int(row.id) for row in created if row.live]
        if ids:
            await _drop_memories(db, user_id, ids, live, import_id)
        await db.execute(delete(Import).where(Import.id == import_id, Import.user_id == user_id))
    return UndoneImport(messages=int(owned), memories=len(ids))


async def _drop_memories(
    db: AsyncSession, user_id: int, ids: list[int], live: list[int], import_id: int
) -> None:
    """Delete the import's memories (their events and questions go with them), bring
    back what a live one of them replaced, and drop threads only the import opened."""
    await db.execute(
        text(
            "UPDATE memories SET valid_until = NULL, superseded_by = NULL "
            "WHERE user_id = :uid AND superseded_by = ANY(:live) AND NOT (id = ANY(:ids))"
        ).bindparams(bindparam("live", type_=_ids_type()), bindparam("ids", type_=_ids_type())),
        {"uid": user_id, "live": live, "ids": ids},
    )
    await db.execute(
        text(
            "DELETE FROM memory_questions WHERE user_id = :uid AND source_message_ids && ARRAY("
            "SELECT id FROM messages WHERE import_id = :iid AND user_id = :uid)"
        ),
        {"uid": user_id, "iid": import_id},
    )
    await db.execute(
        text("DELETE FROM memories WHERE user_id = :uid AND id = ANY(:ids)").bindparams(
            bindparam("ids", type_=_ids_type())
        ),
        {"uid": user_id, "ids": ids},
    )
    await db.execute(
        text(
            "DELETE FROM threads AS t WHERE t.user_id = :uid "
            "AND t.session_ids <@ ARRAY(SELECT id FROM sessions WHERE import_id = :iid) "
            "AND NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.thread_id = t.id)"
        ),
        {"uid": user_id, "iid": import_id},
    )


def _ids_type() -> Any:
    return ARRAY(BigInteger)
