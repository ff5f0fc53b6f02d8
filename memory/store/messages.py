"""Writing the conversation log: the person's messages, the companion's replies, edits,
statuses and the vectors filled in later.

The inbound path (`record_inbound`) resolves the person, opens or rolls the session and
stores the message in one transaction, before anything else happens.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import structlog
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert

from memory.store.inbound import NewMessage, store_known
from memory.store.log_access import LogAccess
from memory.store.log_statements import (
    UNEMBEDDED,
    current_session,
    memory_params,
    reply_statement,
    to_message,
    to_person,
    to_session,
    usage_params,
)
from memory.store.people import resolve_person
from memory.store.ports import EmbeddingError
from memory.store.records import Inbound, MemoryUse, StoredMessage, TokenUsage
from memory.store.tables import Identity, Message
from memory.store.tables import Session as SessionRow

log = structlog.get_logger(__name__)


class SqlMessages(LogAccess):
    """The writes of the conversation log, scoped by person in every statement."""

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
            user, existing_id = await resolve_person(
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
        memory: MemoryUse | None = None,
    ) -> int:
        """Store one message of the companion's and return its id; with `answers_through`,
        mark the person's waiting messages up to that id answered; `memory` records what
        its memory block cost. One statement, so the reply and the answered marks are
        stored together or not at all."""
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
            **memory_params(memory),
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

    async def mark_message(self, *, user_id: int, message_id: int, status: str) -> None:
        """Set a message's status (e.g. 'answered', 'unanswered')."""
        async with self._sessions.begin() as db:
            await db.execute(
                update(Message)
                .where(Message.id == message_id, Message.user_id == user_id)
                .values(status=status)
            )

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
