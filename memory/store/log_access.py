"""What the conversation log's repositories share: the sessionmakers and the embedder.

`SqlPeople`, `SqlSessions`, `SqlMessages` and `SqlMessageReads` each hold one concern of
the log; `memory.store.conversations.SqlConversationStore` is all four over one set of
connections.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.ports import Embedder


class LogAccess:
    """The connections of the conversation log (the autocommit one for single statements)."""

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
