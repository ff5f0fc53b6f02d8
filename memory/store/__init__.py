"""The store: the engine, the tables, and the repositories that own every SQL statement
(the scheduler's claims, outbox and patrol bookkeeping included: `bot`, `scheduler` and
`adapters` import no SQLAlchemy, a contract in pyproject.toml checks it).

Everything here talks to PostgreSQL and hands plain records (`memory.store.records`,
`memory.store.items`) upward, never ORM rows; the ports `memory` needs from outside
(`memory.store.ports`) and its errors live here too. It may import SQLAlchemy, asyncpg and
`memory.local_time`, and nothing else of `memory`: recall, learning and care build on the
store, never the other way round.
"""
