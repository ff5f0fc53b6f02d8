"""pgvector's column type, sent to PostgreSQL in binary.

pgvector's SQLAlchemy type prints every float of a vector as text before sending it,
which cost a tenth of a turn's CPU. This type hands lists and arrays to the connection
instead, whose binary codec (registered on every connection by `memory.store.database`)
packs them as float4s.
"""

from __future__ import annotations

from typing import Any

from asyncpg import Connection
from pgvector.asyncpg import register_vector
from pgvector.sqlalchemy import VECTOR
from sqlalchemy import Dialect


class BinaryVector(VECTOR):
    """A `vector` column or parameter whose values travel in binary."""

    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        """None: the connection's codec encodes lists and arrays itself."""
        return None


async def register_binary_vectors(connection: Connection) -> bool:
    """Teach a new connection the binary form of `vector`; False while the type does not
    exist yet (a fresh database, before the first migration creates the extension)."""
    try:
        await register_vector(connection)
    except ValueError as exc:
        if "unknown type" not in str(exc):
            raise
        return False
    return True
