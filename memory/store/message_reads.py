"""Reading the conversation log: a session's messages, a turn's history, the turns still
waiting for an answer, one message's status."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import exists, select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import aliased

from memory.store.log_access import LogAccess
from memory.store.recent_past import (
    HISTORY_LIMIT,
    MAX_EARLIER_SESSIONS,
    History,
    history_statement,
    to_history,
)
from memory.store.records import WaitingTurn
from memory.store.tables import Identity, Message, User


class SqlMessageReads(LogAccess):
    """The reads of the conversation log, scoped by person in every query."""

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
        ended since `since` with their summaries (see `memory.store.recent_past`)."""
        params = {  # the binds of `history_statement`
            "uid": user_id,
            "sid": session_id,
            "after": after_id or 0,
            "chat": chat_id,
            "since": since,
            "with_summaries": with_summaries,
            "limit": HISTORY_LIMIT,
            "max_sessions": MAX_EARLIER_SESSIONS,
        }
        async with self._autocommit() as db:
            rows = (await db.execute(history_statement(), params)).all()
        return to_history(rows, user_id)
