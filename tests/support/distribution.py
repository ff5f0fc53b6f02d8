"""How the schema would be laid out on a distributed PostgreSQL (Citus), one place for the
tests that keep that possible (docs/scaling.md explains the plan).

Every table is either distributed by the person it belongs to (`user_id`; `users` by its
own `id`), all colocated, or a small reference table copied to every node. A query that
combines two distributed tables must tie them to the same person (equal distribution
columns, or both equal to one value): then it runs on one node, and it never mixes two
people's rows.
"""

from __future__ import annotations

REFERENCE_TABLES = {
    "embedder_identity": "one row: which embedder made the stored vectors",
    "identities": "platform account to person: looked up by the platform's id before the "
    "person is known (unique on platform and platform_user_id)",
    "link_codes": "short-lived /link codes, looked up by the code another account sends",
}
"""Shared tables: reference tables on Citus (their foreign keys to `users` are dropped
there; erasure deletes their rows by `user_id` itself)."""

COORDINATION_TABLES = {
    "burst_marks": "when a platform account's last message arrived (the burst window), "
    "keyed by that account: no content, UNLOGGED, pruned within the hour",
    "rate_buckets": "a platform account's rate-limit tokens, keyed by that account: no "
    "content, UNLOGGED, pruned within the hour",
    "send_paces": "a bot's next free send slot, keyed by the bot: nobody's data, UNLOGGED, "
    "pruned within the hour",
}
"""Cross-process coordination read before the person is known: distributed on Citus by
their own key (a platform account) and never joined with anything."""

NOT_PER_PERSON = frozenset(REFERENCE_TABLES) | frozenset(COORDINATION_TABLES)
"""Tables that are not distributed by a person."""

UNIQUE_WITHOUT_PERSON = {
    ("messages", ("platform", "chat_id", "platform_message_id")): (
        "inbound de-duplication: becomes (user_id, platform, chat_id, platform_message_id); "
        "a platform message has one sender, so nothing that is unique today stops being so"
    ),
    ("outreach", ("idempotency_key",)): (
        "the outbox key: becomes (user_id, idempotency_key), and ON CONFLICT names both"
    ),
}
"""Unique keys of distributed tables without `user_id`: Citus refuses them, so each is
rewritten with `user_id` first when distributing (what each becomes, and why it is safe)."""


KNOWN_UNTIED = {
    "versions(user_id, id) AS (": (
        "the purge of dead memories: tied by `user_id` at every step, but through a "
        "recursive CTE's column list, which the checker does not follow; already in its "
        "Citus form"
    ),
}
"""Statements that read two per-person tables tied through a row id rather than the
person (the rows belong to one person, but nothing in the statement says so, and Citus
needs it said): each with the change it needs before distributing. The scenario test
fails on any other, and on any of these it no longer sees (fixed: remove it here)."""


def distribution_column(table: str) -> str:
    """The column a per-person table is distributed by."""
    return "id" if table == "users" else "user_id"
