"""How long `/link CODE` holds two people locked while it joins them.

Two people on the embedded PostgreSQL, each with MEMORIES memories (a tenth of them the
same text on both sides, every one with a vector) and MESSAGES messages in 20 sessions;
one asks for a code, the other redeems it. Run: `python -m bench.link_join [memories]`.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from bench.turn_overhead import InstantLLM
from bot.bootstrap import build_core
from bot.config import Settings
from memory.care.linking import Linked, redeem_code
from memory.store.link_codes import issue_code

MEMORIES = 1000
MESSAGES = 10_000
ROUNDS = 3

_SEED = text("""
WITH s AS (
    INSERT INTO sessions (user_id, started_at, last_message_at, closed_at)
    SELECT :uid, now(), now(), now() FROM generate_series(1, 20)
    RETURNING id
), sid AS (SELECT array_agg(id) AS ids FROM s),
m AS (
    INSERT INTO messages (user_id, session_id, role, content, platform, created_at)
    SELECT :uid, sid.ids[1 + g % 20], 'user', 'message ' || g, :platform, now()
    FROM generate_series(1, :messages) AS g, sid
)
INSERT INTO memories (user_id, short_id, tier, category, content, content_hash, importance,
                      confidence, source, valid_from, embedding)
SELECT :uid, g, 'core', 'fact', c.content, md5(c.content), 5, 0.8, 'extracted', now(),
       CAST(CAST((SELECT array_agg(random() - 0.5 + d * 0 + g * 0)
                  FROM generate_series(1, :dim) AS d) AS real[]) AS vector)
FROM generate_series(1, :memories) AS g
CROSS JOIN LATERAL (
    SELECT CASE WHEN g % 10 = 0 THEN 'shared fact ' || g ELSE :platform || ' fact ' || g END
        AS content
) AS c
""")


async def one_round(core_settings: Settings, memories: int) -> tuple[float, Linked]:
    """Seed two people, link them, return the milliseconds `redeem_code` took."""
    core = await build_core(core_settings, llm=InstantLLM())
    try:
        ids = []
        for platform in ("telegram", "discord"):
            person = await core.store.ensure_person(
                platform=platform, platform_user_id="p", chat_id="c", display_name=None
            )
            ids.append(person.id)
            async with core.sessions.begin() as db:
                params = {"uid": person.id, "platform": platform, "messages": MESSAGES}
                params["dim"] = Settings().embedding_dim
                await db.execute(
                    _SEED, params | {"memories": memories, "dim": Settings().embedding_dim}
                )
                await db.execute(
                    text("UPDATE users SET memory_seq = :n WHERE id = :uid"),
                    {"n": memories, "uid": person.id},
                )
        now = core.clock.now()
        issued = await issue_code(core.sessions, platform="telegram", platform_user_id="p", now=now)
        assert issued.code is not None
        started = time.perf_counter()
        outcome = await redeem_code(
            core.sessions, platform="discord", platform_user_id="p", code=issued.code, now=now
        )
        elapsed = (time.perf_counter() - started) * 1000
        assert isinstance(outcome, Linked)
        async with core.sessions.begin() as db:  # the next round starts empty
            await db.execute(text("DELETE FROM users"))
        return elapsed, outcome
    finally:
        await core.aclose()


async def measure(memories: int) -> list[tuple[float, Linked]]:
    """ROUNDS joins on one embedded database."""
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(data_dir=Path(data_dir), log_level="WARNING")
        return [await one_round(settings, memories) for _ in range(ROUNDS)]


def main() -> None:
    """Print the report."""
    from bot.logs import configure_logging

    configure_logging("WARNING", "console")
    memories = int(sys.argv[1]) if len(sys.argv) > 1 else MEMORIES
    results = asyncio.run(measure(memories))
    timings = sorted(ms for ms, _ in results)
    linked = results[-1][1]
    print(
        f"/link CODE joining two people, each {memories} memories and {MESSAGES} messages, "
        f"{ROUNDS} rounds, embedded PostgreSQL"
    )
    print(f"  per join: {', '.join(f'{ms:.0f}' for ms in timings)} ms")
    print(f"  moved {linked.moved} memories, merged {linked.merged} duplicates")
    print(f"figure link_join_median {timings[len(timings) // 2]:.0f} ms")


if __name__ == "__main__":
    main()
