"""The nightly patrol's mechanical steps as set-based statements over a batch of people,
run by the scheduler inside the transaction that claimed the batch.

Each statement takes the batch as two arrays (`:ids`, and `:since`, each person's last
patrol) and changes every matching memory at once; changes people can see are recorded
in `memory_events` by the same statement (actor 'patrol').

Decay: a memory's weight is importance × exp(−sessions/30), where `sessions` counts the
person's sessions since it was last recalled or affirmed: their `session_seq` (advanced
here, once a night) less the memory's `recall_seq`. It fades ('dying': out of the
standing block, still recalled) below 2 and, for the active tier, retires ('dead') below
1; core memories are permanent until superseded or forgotten, so they only fade. Pinned
and explicit (source 'user') memories never decay. A recall restarts the clock but a
dying memory stays dying; affirmation makes it active (`memory.learning.affirmation`).
Dead memories are deleted after the retention period (`memory_retention_days`).

The 30-day trash purge deletes forgotten memories with their earlier versions and
erases the words they came from (`memory.care.forgetting.purge_forgotten`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.care.forgetting import TRASH_DAYS, purge_forgotten
from memory.store.patrol import Batch

DECAY_SESSIONS = 30.0
DYING_BELOW = 2.0
DEAD_BELOW = 1.0
ARCHIVE_AFTER = timedelta(days=30)  # expired and not recalled for this long: archived

_PEOPLE = """p AS (
    SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:since AS timestamptz[]))
        AS p(user_id, since)
)"""

_RECORD = """INSERT INTO memory_events (user_id, memory_id, action, actor, details, created_at)
SELECT user_id, id, {action}, 'patrol',
       jsonb_build_object('short_id', short_id, 'previous_status', old_status,
                          'status', new_status),
       CAST(:now AS timestamptz)
FROM changed WHERE new_status <> old_status"""


def _transition(where: str, new_status: str, action: str, also: str = "") -> TextClause:
    """Move the memories matching `where` (alias m, with p) to `new_status`, recorded."""
    return text(f"""
WITH {_PEOPLE},
planned AS (
    SELECT m.id, m.user_id, m.short_id, m.status AS old_status,
           CAST('{new_status}' AS text) AS new_status
    FROM memories AS m JOIN p ON m.user_id = p.user_id
    WHERE m.valid_until IS NULL AND NOT m.pinned AND {where}
    FOR UPDATE OF m
),
changed AS (
    UPDATE memories AS m SET status = planned.new_status{also}
    FROM planned WHERE m.id = planned.id
    RETURNING planned.*
)
{_RECORD.format(action=f"'{action}'")}
""")


# The person's sessions since the last patrol, counted once: a memory's sessions since
# recall are then the person's count less the memory's count at its last recall.
COUNT_SESSIONS = text(f"""
WITH {_PEOPLE},
activity AS (
    SELECT p.user_id, count(*) AS k
    FROM p JOIN sessions AS s
      ON s.user_id = p.user_id AND s.started_at > p.since AND s.started_at <= :now
    GROUP BY p.user_id
)
UPDATE users AS u SET session_seq = u.session_seq + a.k FROM activity AS a WHERE u.id = a.user_id
""")

# Retrieval alone is one activation: a dying memory recalled since the last patrol has
# its decay clock restarted (it will not die of that fade), but it stays `dying`, so
# recall-only; only affirmation (memory.learning.affirmation) makes it `active` again.
REVIVE = text(f"""
WITH {_PEOPLE},
kept AS (
    UPDATE memories AS m
    SET recall_seq = (SELECT u.session_seq FROM users AS u WHERE u.id = m.user_id)
    FROM p
    WHERE m.user_id = p.user_id AND m.valid_until IS NULL AND NOT m.pinned
      AND m.status = 'dying' AND m.last_recalled_at > p.since
    RETURNING m.id, m.user_id, m.short_id
)
INSERT INTO memory_events (user_id, memory_id, action, actor, details, created_at)
SELECT user_id, id, 'revive', 'patrol',
       jsonb_build_object('short_id', short_id, 'status', 'dying', 'recall_only', true),
       CAST(:now AS timestamptz)
FROM kept
""")
EXPIRE = _transition(
    "m.tier = 'active' AND m.status = 'active' AND m.expires_at < :now "
    "AND (m.last_recalled_at IS NULL OR m.last_recalled_at < m.expires_at)",
    "dying",
    "expire",
)
ARCHIVE = _transition(
    "m.tier = 'active' AND m.status IN ('active', 'dying') AND m.expires_at < :archive_before "
    "AND coalesce(m.last_recalled_at, m.expires_at) < :archive_before",
    "dead",
    "archive",
)

# Only the people who talked since the last patrol can fade; of their memories only
# those whose status changes are rewritten, and those recalled since then (their count
# starts again now).
DECAY = text(f"""
WITH {_PEOPLE},
talked AS (
    SELECT DISTINCT p.user_id, p.since
    FROM p JOIN sessions AS s
      ON s.user_id = p.user_id AND s.started_at > p.since AND s.started_at <= :now
),
weighed AS (
    SELECT m.id, m.user_id, m.short_id, m.tier, m.status AS old_status, u.session_seq,
           coalesce(m.last_recalled_at > t.since, false) AS recalled,
           m.importance * exp(-(u.session_seq - m.recall_seq) / CAST(:tau AS float8)) AS weight
    FROM memories AS m JOIN talked AS t ON m.user_id = t.user_id
    JOIN users AS u ON u.id = m.user_id
    WHERE m.valid_until IS NULL AND m.status IN ('active', 'dying')
      AND NOT m.pinned AND m.source <> 'user'
),
planned AS (
    SELECT w.id, w.user_id, w.short_id, w.old_status, w.recalled, w.session_seq,
           CASE WHEN w.recalled THEN w.old_status
                WHEN w.tier = 'active' AND w.weight < :dead THEN 'dead'
                WHEN w.weight < :dying THEN 'dying'
                ELSE w.old_status END AS new_status
    FROM weighed AS w
),
changed AS (
    UPDATE memories AS m SET status = planned.new_status,
           recall_seq = CASE WHEN planned.recalled THEN planned.session_seq ELSE m.recall_seq END
    FROM planned
    WHERE m.id = planned.id AND (planned.new_status <> planned.old_status OR planned.recalled)
    RETURNING planned.*
)
{_RECORD.format(action="CASE new_status WHEN 'dead' THEN 'retire' ELSE 'fade' END")}
""")

# A thread with a forgotten memory may carry its words in its title: once the memory is
# purged nothing would say so, so the thread is withdrawn for good first.
WITHDRAW_THREADS = text(f"""
WITH {_PEOPLE}
UPDATE threads AS t SET status = 'withdrawn' FROM p
WHERE t.user_id = p.user_id AND t.status IN ('open', 'promoted')
  AND EXISTS (SELECT 1 FROM memories AS m
              WHERE m.user_id = t.user_id AND m.thread_id = t.id AND m.status = 'forgotten')
""")

CLOSE_STALE = text(f"""
WITH {_PEOPLE}
UPDATE sessions AS s SET closed_at = s.last_message_at, extraction_due = true
FROM p
WHERE s.user_id = p.user_id AND s.closed_at IS NULL AND s.last_message_at < :idle_before
""")

# Dead memories stay findable by an explicit search for the retention period after they
# died (their 'retire' or 'archive' event), then go with every earlier version of them;
# their events and questions go with them (ON DELETE CASCADE), and with the rows their
# vectors and provenance (source message ids). The messages stay: they are the
# person's conversation, not derived from the memory.
PURGE_DEAD = text(f"""
WITH RECURSIVE {_PEOPLE},
doomed AS (
    SELECT m.user_id, m.id FROM memories AS m JOIN p ON m.user_id = p.user_id
    WHERE m.status = 'dead' AND m.valid_until IS NULL
      AND coalesce((SELECT max(e.created_at) FROM memory_events AS e
                    WHERE e.user_id = m.user_id AND e.memory_id = m.id
                      AND e.action IN ('retire', 'archive')),
                   m.valid_from) < :dead_before
),
versions(user_id, id) AS (
    SELECT user_id, id FROM doomed
    UNION
    SELECT m.user_id, m.id FROM memories AS m
    JOIN versions AS v ON m.user_id = v.user_id AND m.superseded_by = v.id
)
DELETE FROM memories AS m USING versions AS v WHERE m.user_id = v.user_id AND m.id = v.id
""")

STEPS: tuple[tuple[str, TextClause], ...] = (
    ("count_sessions", COUNT_SESSIONS),
    ("revive", REVIVE),
    ("expire", EXPIRE),
    ("archive", ARCHIVE),
    ("decay", DECAY),
    ("withdraw_threads", WITHDRAW_THREADS),
    ("close_sessions", CLOSE_STALE),
)


def weight(importance: float, sessions: int) -> float:
    """A memory's decayed weight: importance × exp(−sessions/30)."""
    return importance * math.exp(-sessions / DECAY_SESSIONS)


async def run_mechanical(
    db: AsyncSession,
    batch: Batch,
    *,
    now: datetime,
    idle_gap: timedelta,
    retention: timedelta | None = None,
) -> dict[str, int]:
    """Every mechanical step for the batch, in the caller's transaction; rows per step.
    Dead memories are deleted `retention` after they died (None keeps them)."""
    params = {
        "ids": list(batch.ids),
        "since": list(batch.since),
        "now": now,
        "archive_before": now - ARCHIVE_AFTER,
        "idle_before": now - idle_gap,
        "tau": DECAY_SESSIONS,
        "dead": DEAD_BELOW,
        "dying": DYING_BELOW,
    }
    counts: dict[str, int] = {}
    for name, statement in STEPS:
        used = {k: v for k, v in params.items() if f":{k}" in statement.text}
        result = await db.execute(statement, used)
        counts[name] = int(getattr(result, "rowcount", 0) or 0)
    # The trash purge also erases the words behind what it purges: several statements,
    # each still set-based over the whole batch.
    counts["purge_trash"] = await purge_forgotten(db, user_ids=batch.ids, before=now - TRASH_DAYS)
    if retention is not None:
        purged = await db.execute(
            PURGE_DEAD,
            {"ids": list(batch.ids), "since": list(batch.since), "dead_before": now - retention},
        )
        counts["purge_dead"] = int(getattr(purged, "rowcount", 0) or 0)
    return counts


def batch_of(rows: Sequence[tuple[int, datetime | None]], now: datetime) -> Batch:
    """The batch from (id, last patrol) pairs; a first patrol looks back one day."""
    first = now - timedelta(days=1)
    return Batch(tuple(r[0] for r in rows), tuple(r[1] or first for r in rows))
