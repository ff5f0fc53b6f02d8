"""The store: the engine, the tables, and the repositories that own every SQL statement
(the scheduler's claims, outbox and patrol bookkeeping included: `bot`, `scheduler` and
`adapters` import no SQLAlchemy, a contract in pyproject.toml checks it).

Everything here talks to PostgreSQL and hands plain records (`memory.store.records`,
`memory.store.items`) upward, never ORM rows. It may import SQLAlchemy and asyncpg, and
nothing of the rest of `memory` except what it owns: recall, learning and care build on the
store, never the other way round.
"""
