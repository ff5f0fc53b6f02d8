"""Everything stored about one person, as plain JSON-ready data (`/export`)."""

from __future__ import annotations

from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.care.erasure import person_tables
from memory.store.statuses import COMMAND, HIDDEN
from memory.store.tables import Base, Identity, User

INTERNAL_TABLES = frozenset(
    {"button_actions", "link_codes", "link_attempts", "panel_links", "panel_sessions"}
)
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
    _withhold_hidden(data)
    return data


def _withhold_hidden(data: dict[str, Any]) -> None:
    """Words the person asked to forget are not handed out again: hidden messages keep
    their place without their content, diary entries written from them are shown as
    withdrawn, and so are threads a forgotten memory was filed under (their titles may
    repeat it). Memories in the trash stay listed, as /memory trash shows them."""
    hidden = {m["id"] for m in data.get("messages", []) if m.get("status") == HIDDEN}
    # A command's text (`memory.care.provenance`) is never hidden by status; it is withheld
    # like the rest once a memory it made is forgotten.
    forgotten = [m for m in data.get("memories", []) if m.get("status") == "forgotten"]
    behind = {i for m in forgotten for i in m.get("source_message_ids") or ()}
    hidden |= {
        m["id"]
        for m in data.get("messages", [])
        if m.get("status") == COMMAND and m["id"] in behind
    }
    for message in data.get("messages", []):
        if message["id"] in hidden:
            message["content"] = None
    for entry in data.get("diary_entries", []):
        if hidden.intersection(entry.get("source_message_ids") or ()):
            entry.update(lines=[], notes_to_self=[], withdrawn=True)
    tainted = {m["thread_id"] for m in data.get("memories", []) if m.get("status") == "forgotten"}
    for thread in data.get("threads", []):
        if thread["id"] in tainted or thread.get("status") == "withdrawn":
            thread.update(title=None, status="withdrawn")
