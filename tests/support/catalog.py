"""What the database itself says it holds about a person, read from PostgreSQL's catalog
(`information_schema`), never from the ORM metadata the code under test uses: a table
added by a migration but forgotten by the erase or purge code still shows up here."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

# Tables that hold no row of a person by a `user_id` column, and why that is fine.
NOT_BY_USER_ID = {
    "alembic_version": "the schema revision; nobody's data",
    "users": "the person's own row, checked by its id",
    "embedder_identity": "which embedder made the stored vectors; one row, nobody's data",
    "burst_marks": "a platform account's last message time for the burst window: no "
    "content, keyed by the account (erased with the person's accounts, pruned hourly)",
    "rate_buckets": "a platform account's rate-limit tokens: no content, keyed by the "
    "account (erased with the person's accounts, pruned hourly)",
    "send_paces": "a bot's next free send slot, keyed by the bot: nobody's data (pruned hourly)",
}


async def public_tables(sessions: async_sessionmaker[AsyncSession]) -> list[str]:
    """Every base table in the public schema."""
    async with sessions() as db:
        rows = await db.execute(
            text(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
            )
        )
        return [row[0] for row in rows]


async def tables_with_user_id(sessions: async_sessionmaker[AsyncSession]) -> list[str]:
    """Every public table with a `user_id` column."""
    async with sessions() as db:
        rows = await db.execute(
            text(
                "SELECT c.table_name FROM information_schema.columns AS c "
                "JOIN information_schema.tables AS t USING (table_schema, table_name) "
                "WHERE c.table_schema = 'public' AND c.column_name = 'user_id' "
                "AND t.table_type = 'BASE TABLE' ORDER BY 1"
            )
        )
        return [row[0] for row in rows]


async def rows_per_table(
    sessions: async_sessionmaker[AsyncSession], user_id: int
) -> dict[str, int]:
    """How many rows of the person each table holds (`users` by id, the rest by user_id)."""
    counts: dict[str, int] = {}
    async with sessions() as db:
        for table in await tables_with_user_id(sessions):
            query = text(f'SELECT count(*) FROM "{table}" WHERE user_id = :u')
            counts[table] = int(await db.scalar(query, {"u": user_id}) or 0)
        users = text("SELECT count(*) FROM users WHERE id = :u")
        counts["users"] = int(await db.scalar(users, {"u": user_id}) or 0)
    return counts


async def rows_mentioning(
    sessions: async_sessionmaker[AsyncSession], needle: str, *, user_id: int | None = None
) -> dict[str, int]:
    """Rows whose text (every column, cast to text: content, arrays, JSON, tsvectors)
    contains `needle`, case-insensitively, per table; only the person's rows when
    `user_id` is given. Tables without a match are left out."""
    found: dict[str, int] = {}
    scoped = set(await tables_with_user_id(sessions))
    pattern = "%" + needle.replace("%", "\\%").replace("_", "\\_") + "%"
    async with sessions() as db:
        for table in await public_tables(sessions):
            query = f'SELECT count(*) FROM "{table}" AS t WHERE CAST(t AS text) ILIKE :p'
            params: dict[str, object] = {"p": pattern}
            if user_id is not None and table in scoped:
                query += " AND t.user_id = :u"
                params["u"] = user_id
            elif user_id is not None and table == "users":
                query += " AND t.id = :u"
                params["u"] = user_id
            elif user_id is not None:
                continue
            count = int(await db.scalar(text(query), params) or 0)
            if count:
                found[table] = count
    return found


async def user_id_of(sessions: async_sessionmaker[AsyncSession], platform_user_id: str) -> int:
    """The person behind a platform account (looked up, never assumed)."""
    async with sessions() as db:
        found = await db.scalar(
            text("SELECT user_id FROM identities WHERE platform_user_id = :p"),
            {"p": platform_user_id},
        )
    assert found is not None, f"nobody is {platform_user_id}"
    return int(found)


async def snapshot(
    sessions: async_sessionmaker[AsyncSession], user_id: int
) -> dict[str, list[str]]:
    """Every row of the person in every table (each row as its text), for before/after
    comparisons."""
    rows: dict[str, list[str]] = {}
    async with sessions() as db:
        for table in [*await tables_with_user_id(sessions), "users"]:
            column = "id" if table == "users" else "user_id"
            query = text(f'SELECT CAST(t AS text) FROM "{table}" AS t WHERE t.{column} = :u')
            rows[table] = sorted(await db.scalars(query, {"u": user_id}))
    return rows
