"""Which database errors are an outage (the message is kept and retried until the database
is back) and which are a failed statement (retried a few times, then dropped)."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError

from memory.store.database import is_outage


class DriverError(Exception):
    """A driver error carrying PostgreSQL's SQLSTATE, as asyncpg's adapted errors do."""

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def wrapped(message: str, sqlstate: str | None) -> DBAPIError:
    return DBAPIError("SELECT 1", {}, DriverError(message, sqlstate))


def test_a_server_starting_up_shutting_down_or_unreachable_is_an_outage() -> None:
    assert is_outage(wrapped("the database system is starting up", "57P03"))
    assert is_outage(wrapped("terminating connection due to administrator command", "57P01"))
    assert is_outage(wrapped("terminating connection due to crash", "57P02"))
    assert is_outage(wrapped("connection failure", "08006"))
    assert is_outage(InterfaceError("SELECT 1", {}, DriverError("connection is closed", None)))
    assert is_outage(ConnectionRefusedError())


def test_a_failed_statement_is_not_an_outage() -> None:
    assert not is_outage(wrapped("duplicate key value violates unique constraint", "23505"))
    assert not is_outage(wrapped("canceling statement due to statement timeout", "57014"))
    assert not is_outage(wrapped("relation does not exist", "42P01"))
    assert not is_outage(wrapped("no state at all", None))
    assert not is_outage(ValueError("not a database error"))
