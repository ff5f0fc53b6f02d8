"""Per-person coordination across processes, in PostgreSQL: a person's turn claimed by one
process at a time (a lease row, or for comparison a transaction-scoped advisory lock), the
quiet time of a burst, and the rate limit's token bucket; and a bot's send pace (its next
free slot), shared by every process sending as that bot. Every time is the database's
own clock (`clock_timestamp()`), so processes with drifting clocks agree.

Each call is one statement on an AUTOCOMMIT connection (no ORM session: they run
several times a turn): no transaction, and no connection, is held
while a turn is answered (a lease is renewed instead). A process that dies leaves a claim
that runs out after its lease; the advisory lock goes with its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from memory.store.database import Database

# Taken when free, when the holder's lease ran out (a process that stalled), or when the
# holder's liveness lock is gone (a process that died: its connection closed).
_CLAIM = text("""
INSERT INTO turn_claims AS c (user_id, holder, holder_key, expires_at)
VALUES (:user_id, :holder, :holder_key, clock_timestamp() + make_interval(secs => :lease))
ON CONFLICT (user_id) DO UPDATE
    SET holder = excluded.holder, holder_key = excluded.holder_key,
        expires_at = excluded.expires_at
    WHERE c.expires_at < clock_timestamp() OR c.holder = excluded.holder
       OR (c.holder_key IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM pg_locks AS l
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
              AND l.classid::bigint = c.holder_key >> 32
              AND l.objid::bigint = c.holder_key & 4294967295))
RETURNING user_id
""")
_LIVENESS = text("SELECT pg_advisory_lock(:key)")
_RENEW = text("""
UPDATE turn_claims SET expires_at = clock_timestamp() + make_interval(secs => :lease)
WHERE user_id = :user_id AND holder = :holder
RETURNING user_id
""")
_RELEASE = text("DELETE FROM turn_claims WHERE user_id = :user_id AND holder = :holder")

_MARK = text("""
INSERT INTO burst_marks AS b (key, last_at) VALUES (:key, clock_timestamp())
ON CONFLICT (key) DO UPDATE SET last_at = greatest(b.last_at, excluded.last_at)
""")
_QUIET = text("""
SELECT extract(epoch FROM clock_timestamp() - last_at) FROM burst_marks WHERE key = :key
""")

# One token bucket step: refill by the time passed, take one token when there is one.
_TAKE = text("""
WITH refill AS (
    SELECT least(CAST(:burst AS float8),
                 b.tokens + extract(epoch FROM clock_timestamp() - b.updated_at) * :rate)
           AS tokens
    FROM rate_buckets AS b WHERE b.key = :key
)
INSERT INTO rate_buckets AS b (key, tokens, updated_at, allowed)
VALUES (:key, CAST(:burst AS float8) - 1, clock_timestamp(), true)
ON CONFLICT (key) DO UPDATE SET
    tokens = CASE WHEN (SELECT tokens FROM refill) >= 1 THEN (SELECT tokens FROM refill) - 1
                  ELSE (SELECT tokens FROM refill) END,
    updated_at = clock_timestamp(),
    allowed = (SELECT tokens FROM refill) >= 1
RETURNING allowed
""")

# The next free send slot of a bot, `gap` after the last one taken (or now, when the pace
# is idle); returns how long until the slot just taken (at most 0 when it is now).
_PACE = text("""
INSERT INTO send_paces AS p (key, next_at)
VALUES (:key, clock_timestamp() + make_interval(secs => :gap))
ON CONFLICT (key) DO UPDATE
    SET next_at = greatest(p.next_at, clock_timestamp()) + make_interval(secs => :gap)
RETURNING extract(epoch FROM p.next_at - clock_timestamp()) - :gap
""")

# What no longer coordinates anything: ran-out claims, bursts, buckets and send paces quiet
# for long (a bucket that long untouched is full again; an hour forgives even the slowest
# rate; a pace's slot an hour past holds nobody back).
_PRUNE = (
    text("DELETE FROM turn_claims WHERE expires_at < clock_timestamp()"),
    text("DELETE FROM burst_marks WHERE last_at < clock_timestamp() - make_interval(secs => :s)"),
    text(
        "DELETE FROM rate_buckets WHERE updated_at < clock_timestamp() - make_interval(secs => :s)"
    ),
    text("DELETE FROM send_paces WHERE next_at < clock_timestamp() - make_interval(secs => :s)"),
)

_ADVISORY = text("SELECT pg_advisory_xact_lock(:space, :key)")
ADVISORY_SPACE = 21_021
"""The first key of the turn advisory locks (the second is the person, modulo 2^31)."""


class SqlCoordination:
    """The coordination statements over the autocommit sessions (and, for the advisory
    variant, the engine: a connection held for the turn)."""

    def __init__(self, autocommit: Database, engine: AsyncEngine) -> None:
        self._autocommit = autocommit
        self._engine = engine
        # Plain connections, no ORM session: these statements run several times a turn.
        self._direct = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def claim_turn(
        self, user_id: int, holder: str, *, lease: float, holder_key: int | None = None
    ) -> bool:
        """Claim the person's turn for `lease` seconds; False while another (live) process
        holds it. `holder_key` names the holder's liveness lock (`keep_alive`)."""
        params = {"user_id": user_id, "holder": holder, "lease": lease, "holder_key": holder_key}
        async with self._direct.connect() as db:
            return (await db.execute(_CLAIM, params)).first() is not None

    async def keep_alive(self, key: int, held: asyncio.Event) -> None:
        """Hold the session advisory lock `key` on a connection of its own until
        cancelled (or the connection is lost): while it is held, this process is alive
        for the others. Sets `held` once taken."""
        async with self._engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(_LIVENESS, {"key": key})
            held.set()
            try:
                while True:  # a ping now and then notices a lost connection
                    await asyncio.sleep(30)
                    await asyncio.shield(conn.execute(text("SELECT 1")))
            finally:
                held.clear()
                # Closed, not returned to the pool: the lock must not outlive this.
                await asyncio.shield(conn.invalidate())

    async def renew_turn(self, user_id: int, holder: str, *, lease: float) -> bool:
        """Extend a held claim; False when it was lost (ran out and taken by another)."""
        async with self._direct.connect() as db:
            row = await db.execute(_RENEW, {"user_id": user_id, "holder": holder, "lease": lease})
            return row.first() is not None

    async def release_turn(self, user_id: int, holder: str) -> None:
        """Give the claim up (nothing when it is no longer this holder's)."""
        async with self._direct.connect() as db:
            await db.execute(_RELEASE, {"user_id": user_id, "holder": holder})

    @contextlib.asynccontextmanager
    async def advisory_turn(self, user_id: int) -> AsyncIterator[None]:
        """Hold the person's transaction-scoped advisory lock for the block (a connection
        and an open transaction for the whole turn; released when its connection closes)."""
        async with self._engine.begin() as conn:
            await conn.execute(_ADVISORY, {"space": ADVISORY_SPACE, "key": user_id % 2**31})
            yield

    async def mark_burst(self, key: str) -> None:
        """A message of the burst `key` arrived now."""
        async with self._direct.connect() as db:
            await db.execute(_MARK, {"key": key})

    async def quiet_seconds(self, key: str) -> float | None:
        """Seconds since the burst's last message arrived (None: never marked)."""
        async with self._direct.connect() as db:
            value = (await db.execute(_QUIET, {"key": key})).scalar()
        return None if value is None else float(value)

    async def take_token(self, key: str, *, per_minute: float, burst: int) -> bool:
        """Take one token of `key`'s bucket (`burst` at most, refilled at `per_minute`);
        False when it is empty."""
        params = {"key": key, "rate": per_minute / 60.0, "burst": float(burst)}
        async with self._direct.connect() as db:
            return bool((await db.execute(_TAKE, params)).scalar())

    async def take_send_slot(self, key: str, *, gap: float) -> float:
        """Take the next send slot of bot `key` (slots `gap` seconds apart across every
        process); the seconds to wait for it (0 or less: send now)."""
        async with self._direct.connect() as db:
            return float((await db.execute(_PACE, {"key": key, "gap": gap})).scalar_one())

    async def prune(self, *, quiet_seconds: float = 3600.0) -> int:
        """Delete ran-out claims, and burst marks, buckets and send paces quiet for
        `quiet_seconds` (their keys name platform ids: kept no longer than they matter);
        how many."""
        removed = 0
        async with self._direct.connect() as db:
            for statement in _PRUNE:
                result = await db.execute(statement, {"s": quiet_seconds})
                removed += result.rowcount or 0
        return removed


_FORGET_ACCOUNTS = text("""
WITH gone AS (DELETE FROM rate_buckets WHERE key = ANY (:keys))
DELETE FROM burst_marks
WHERE key = ANY (:keys) OR key LIKE ANY (ARRAY(SELECT replace(replace(replace(k, '\\', '\\\\'),
                                                                 '%', '\\%'), '_', '\\_') || ':%'
                                               FROM unnest(CAST(:keys AS text[])) AS k))
""")


async def forget_accounts(db: AsyncSession, accounts: Sequence[tuple[str, str]]) -> None:
    """Drop the coordination rows of these (platform, platform user id) accounts: their
    rate-limit buckets and burst marks (erasing a person leaves no key naming them)."""
    if accounts:
        keys = [f"{platform}:{account}" for platform, account in accounts]
        await db.execute(_FORGET_ACCOUNTS, {"keys": keys})
