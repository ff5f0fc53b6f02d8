"""Everything stored about one person, as plain JSON-ready data (`/export`)."""

from __future__ import annotations

from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.erasure import person_tables
from memory.tables import Base, Identity, User

INTERNAL_TABLES = frozenset({"button_actions"})
INTERNAL_COLUMNS = frozenset({"embedding", "tsv", "content_hash", "user_id"})
IDENTITY_COLUMNS = ("platform", "platform_user_id", "reachable", "created_at")


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


async def export_person(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int
) -> dict[str, Any]:
    """The person's settings and every row of theirs, table by table (no embeddings)."""
    async with sessions() as db:
        user = await db.get_one(User, user_id)
        data: dict[str, Any] = {
            "settings": {
                column.name: _plain(getattr(user, column.key))
                for column in User.__table__.columns
                if column.name not in {"memory_seq", "id"}
            },
        }
        identities = await db.scalars(select(Identity).where(Identity.user_id == user_id))
        data["identities"] = [
            {name: _plain(getattr(row, name)) for name in IDENTITY_COLUMNS} for row in identities
        ]
        for name in person_tables():
            if name in INTERNAL_TABLES or name == "identities":
                continue
            table = Base.metadata.tables[name]
            columns = [c for c in table.c if c.name not in INTERNAL_COLUMNS]
            order = table.c.id if "id" in table.c else columns[0]
            rows = await db.execute(
                select(*columns).where(table.c.user_id == user_id).order_by(order)
            )
            data[name] = [{k: _plain(v) for k, v in row._mapping.items()} for row in rows]
    return data
