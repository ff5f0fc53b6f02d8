"""The conversation log in PostgreSQL: people, sessions and messages, over one set of
connections.

Each concern is its own repository (`memory.store.people`, `.conversation_sessions`,
`.messages`, `.message_reads`); `SqlConversationStore` is all of them, for the callers
that need more than one. A caller that needs one concern takes that class.
"""

from __future__ import annotations

from memory.store.conversation_sessions import SqlSessions
from memory.store.message_reads import SqlMessageReads
from memory.store.messages import SqlMessages
from memory.store.people import SqlPeople


class SqlConversationStore(SqlPeople, SqlSessions, SqlMessages, SqlMessageReads):
    """The conversation log, scoped by person in every query."""
