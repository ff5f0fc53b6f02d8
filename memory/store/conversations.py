"""People, identities, sessions and messages: the conversation log in PostgreSQL.

The inbound path (`record_inbound`) resolves the person, opens or rolls the session and
stores the message in one transaction, before anything else happens.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import exists, select, update
from sqlalchemy.dialects.postgresql import distinct_on, insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import aliased

from memory.recall.embeddings import EmbeddingError
from memory.recall.recent_past import History, read_history
from memory.store.inbound import NewMessage, store_known
from memory.store.log_statements import (
    UNEMBEDDED,
    current_session,
    reply_statement,
    session_messages_statement,
    stored_as,
    to_message,
    to_person,
    to_session,
    usage_params,
)
from memory.store.ports import Embedder
from memory.store.records import (
    ConversationSession,
    Inbound,
    Person,
    StoredMessage,
    TokenUsage,
    WaitingTurn,
)
from memory.store.tables import Identity, Message, User
from memory.store.tables import Session as SessionRow

log = structlog.get_logger(__name__)


class SqlConversationStore:
    """The conversation log, scoped by person in every query."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        embedder: Embedder | None = None,
        *,
        autocommit: async_sessionmaker[AsyncSession] | None = None,
    ) -> None:
        self._sessions = sessions
        self._embedder = embedder
        self._autocommit = autocommit or sessions

    async def _embedding(self, text: str) -> list[float] | None:
        """The text's vector; None without an embedder, or when it fails: the message is
        stored all the same (recall still finds it by its words) and `backfill_embeddings`
        fills the vector in later."""
        if self._embedder is None or not text.strip():
            return None
        try:
            return [float(x) for x in (await self._embedder.embed([text]))[0]]
        except EmbeddingError as exc:
            log.warning("conversation.embedding_failed", error=type(exc).__name__)
            return None

    async def record_inbound(
        self,
        *,
        platform: str,
        platform_user_id: str,
        chat_id: str | None,
        display_name: str | None,
        text: str,
        platform_message_id: str | None,
        now: datetime,
        idle_gap: timedelta,
        private_chat: bool = True,
    ) -> Inbound:
        """Resolve the person, roll the session if idle, store the message; one statement
        for a known person in an open session, else one transaction.

        A message the platform delivers twice (same platform message id) is stored once;
        the second delivery returns the first with `duplicate` set.
        """
        embedding = await self._embedding(text)
        new = NewMessage(
            platform=platform,
            platform_user_id=platform_user_id,
            chat_id=chat_id,
            private_chat=private_chat,
            text=text,
            platform_message_id=platform_message_id,
            now=now,
            embedding=embedding,
        )
        known = await store_known(self._autocommit, new, idle_gap=idle_gap)
        if known is not None:
            return known
        async with self._sessions.begin() as db:
            user, existing_id = await self._resolve(
                db,
                platform,
                platform_user_id,
                chat_id if private_chat else None,
                display_name,
                duplicate_of=(chat_id, platform_message_id),
            )
            waiting = user.pending_edit_until is not None and user.pending_edit_until > now
            pending_edit = user.pending_edit if waiting else None
            if existing_id is not None:
                existing = await db.get_one(Message, existing_id)
                session_row = await db.get_one(SessionRow, existing.session_id)
                return Inbound(
                    to_person(user),
                    to_session(session_row),
                    to_message(existing),
                    None,
                    True,
                    pending_edit=pending_edit,
                )
            session_row, closed_id = await current_session(db, user.id, now, idle_gap)
            message_id = await db.scalar(
                insert(Message)
                .values(
                    user_id=user.id,
                    session_id=session_row.id,
                    role="user",
                    content=text,
                    platform=platform,
                    chat_id=chat_id,
                    platform_message_id=platform_message_id,
                    created_at=now,
                    embedding=embedding,
                )
                .returning(Message.id)
            )
            stored = StoredMessage(
                id=int(message_id or 0),
                user_id=user.id,
                session_id=session_row.id,
                role="user",
                content=text,
                created_at=now,
            )
            return Inbound(
                to_person(user),
                to_session(session_row),
                stored,
                closed_id,
                pending_edit=pending_edit,
            )

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
            user, _ = await self._resolve(
                db, platform, platform_user_id, chat_id if private_chat else None, display_name
            )
            return to_person(user)

    async def _resolve(
        self,
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
        return await self._create_person(db, platform, platform_user_id, chat_id, display_name)

    async def _create_person(
        self,
        db: AsyncSession,
        platform: str,
        platform_user_id: str,
        chat_id: str | None,
        display_name: str | None,
    ) -> tuple[User, None]:
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

    async def add_reply(
        self,
        *,
        user_id: int,
        session_id: int,
        text: str,
        platform: str,
        chat_id: str | None,
        now: datetime,
        usage: TokenUsage | None = None,
        status: str = "stored",
        answers_through: int | None = None,
    ) -> int:
        """Store one message of the companion's and return its id; with `answers_through`,
        mark the person's waiting messages up to that id answered. One statement, so the
        reply and the answered marks are stored together or not at all."""
        embedding = await self._embedding(text) if status == "stored" else None
        params = {
            "r_uid": user_id,
            "r_sid": session_id,
            "r_content": text,
            "r_platform": platform,
            "r_chat": chat_id,
            "r_now": now,
            "r_status": status,
            "r_embedding": embedding,
            "r_through": answers_through,
            **usage_params(usage),
        }
        statement = reply_statement(answers=answers_through is not None)
        async with self._autocommit.begin() as db:  # no BEGIN or COMMIT when autocommit
            connection = await db.connection()  # a Core statement, not an ORM bulk insert
            return int(await connection.scalar(statement, params) or 0)

    async def backfill_embeddings(self, *, limit: int = 200) -> int:
        """Embed stored messages that arrived while the embedder was failing; returns how
        many got their vector (none while it still fails)."""
        if self._embedder is None:
            return 0
        async with self._autocommit() as db:
            rows = (
                await db.execute(
                    select(Message.id, Message.content)
                    .where(Message.embedding.is_(None), Message.status.not_in(UNEMBEDDED))
                    .order_by(Message.id)
                    .limit(limit)
                )
            ).all()
        if not rows:
            return 0
        try:
            vectors = await self._embedder.embed([content for _, content in rows])
        except EmbeddingError as exc:
            log.warning("conversation.backfill_failed", error=type(exc).__name__)
            return 0
        async with self._sessions.begin() as db:
            await db.execute(
                update(Message),
                [
                    {"id": message_id, "embedding": [float(x) for x in vector]}
                    for (message_id, _), vector in zip(rows, vectors, strict=True)
                ],
            )
        return len(rows)

    async def close_idle_sessions(
        self, *, now: datetime, idle_gap: timedelta, limit: int = 500
    ) -> int:
        """Close everyone's sessions idle for longer than the gap (set-based); they are then
        due for extraction. Returns how many were closed."""
        idle = (
            select(SessionRow.id)
            .where(SessionRow.closed_at.is_(None), SessionRow.last_message_at < now - idle_gap)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        async with self._sessions.begin() as db:
            result = await db.execute(
                update(SessionRow)
                .where(SessionRow.id.in_(idle))
                .values(closed_at=SessionRow.last_message_at, extraction_due=True)
            )
        return int(getattr(result, "rowcount", 0) or 0)

    async def mark_message(self, *, user_id: int, message_id: int, status: str) -> None:
        """Set a message's status (e.g. 'answered', 'unanswered')."""
        async with self._sessions.begin() as db:
            await db.execute(
                update(Message)
                .where(Message.id == message_id, Message.user_id == user_id)
                .values(status=status)
            )

    async def waiting_turns(
        self, *, platform: str, since: datetime, limit: int = 1000
    ) -> list[WaitingTurn]:
        """Each person's latest private message on `platform` since `since` that is still
        waiting for an answer, with no reply of the companion's after it."""
        later = aliased(Message)
        query = (
            select(
                Message.id,
                Message.user_id,
                Identity.platform_user_id,
                Message.chat_id,
                Message.platform_message_id,
                Message.content,
                User.display_name,
            )
            .join(
                Identity,
                (Identity.user_id == Message.user_id)
                & (Identity.platform == Message.platform)
                & (Identity.chat_id == Message.chat_id),
            )
            .join(User, User.id == Message.user_id)
            .where(
                Message.platform == platform,
                Message.role == "user",
                Message.status == "stored",
                Message.created_at >= since,
                Identity.reachable,
                ~exists().where(
                    later.user_id == Message.user_id,
                    later.id > Message.id,
                    later.role == "assistant",
                ),
            )
            .ext(distinct_on(Message.user_id))
            .order_by(Message.user_id, Message.id.desc())
            .limit(limit)
        )
        async with self._sessions() as db:
            rows = (await db.execute(query)).all()
        return [
            WaitingTurn(
                message_id=row.id,
                user_id=row.user_id,
                platform_user_id=row.platform_user_id,
                chat_id=row.chat_id or "",
                platform_message_id=row.platform_message_id,
                text=row.content,
                display_name=row.display_name,
            )
            for row in rows
        ]

    async def message_status(self, *, user_id: int, message_id: int) -> str | None:
        """A message's status now ('stored', 'answered', ...), None if it is gone."""
        async with self._autocommit() as db:
            return await db.scalar(
                select(Message.status).where(Message.id == message_id, Message.user_id == user_id)
            )

    async def session_messages(
        self,
        *,
        user_id: int,
        session_id: int,
        after_id: int | None = None,
        limit: int = 200,
        chat_id: str | None = None,
    ) -> list[StoredMessage]:
        """The newest `limit` messages of a session after `after_id` (in one chat, when
        given), oldest first."""
        query = session_messages_statement(after=after_id is not None, in_chat=chat_id is not None)
        params = {"uid": user_id, "sid": session_id, "after": after_id, "chat": chat_id}
        async with self._autocommit() as db:
            rows = (await db.execute(query, params | {"limit": limit})).all()
        return [StoredMessage(*row) for row in reversed(rows)]

    async def history(
        self,
        *,
        user_id: int,
        session_id: int,
        after_id: int | None,
        chat_id: str | None,
        since: datetime,
        with_summaries: bool,
    ) -> History:
        """What a turn may show: the session after `after_id`, and earlier sessions that
        ended since `since` with their summaries (see `memory.recall.recent_past`)."""
        return await read_history(
            self._autocommit,
            user_id=user_id,
            session_id=session_id,
            after_id=after_id,
            chat_id=chat_id,
            since=since,
            with_summaries=with_summaries,
        )

    async def get_session(self, *, user_id: int, session_id: int) -> ConversationSession | None:
        """One session of this person's."""
        async with self._sessions() as db:
            row = await db.scalar(
                select(SessionRow).where(SessionRow.id == session_id, SessionRow.user_id == user_id)
            )
        return to_session(row) if row is not None else None

    async def save_summary(
        self, *, user_id: int, session_id: int, summary: str, through_id: int
    ) -> None:
        """Replace the running summary, now covering messages up to `through_id`."""
        async with self._sessions.begin() as db:
            await db.execute(
                update(SessionRow)
                .where(SessionRow.id == session_id, SessionRow.user_id == user_id)
                .values(summary=summary, summarized_through=through_id)
            )

    async def last_closed_session(self, *, user_id: int) -> ConversationSession | None:
        """The person's most recent closed session (its summary feeds the next one)."""
        async with self._sessions() as db:
            row = await db.scalar(
                select(SessionRow)
                .where(
                    SessionRow.user_id == user_id,
                    SessionRow.closed_at.is_not(None),
                    SessionRow.import_id.is_(None),
                )
                .order_by(SessionRow.id.desc())
                .limit(1)
            )
        return to_session(row) if row is not None else None

    async def edit_message(
        self,
        *,
        platform: str,
        platform_user_id: str,
        chat_id: str | None,
        platform_message_id: str,
        text: str,
        now: datetime,
    ) -> bool:
        """Replace the text of a stored inbound message the person edited."""
        embedding = await self._embedding(text)
        async with self._sessions.begin() as db:
            user_id = await db.scalar(
                select(Identity.user_id).where(
                    Identity.platform == platform, Identity.platform_user_id == platform_user_id
                )
            )
            if user_id is None:
                return False
            result = await db.execute(
                update(Message)
                .where(
                    Message.user_id == user_id,
                    Message.platform == platform,
                    Message.chat_id == chat_id,
                    Message.platform_message_id == platform_message_id,
                    Message.role == "user",
                )
                .values(content=text, edited_at=now, embedding=embedding)
            )
            return bool(getattr(result, "rowcount", 0))

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
