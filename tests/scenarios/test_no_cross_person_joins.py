"""No query joins two people's rows (docs/scaling.md): a week of three people chatting,
using the commands, getting check-ins and a follow-up, with extraction, the nightly
patrol and the diary running; every SQL statement the companion sends is recorded and
parsed with PostgreSQL's own parser, and each one that reads two per-person tables must
tie them to one person (`tests/support/sql_people.py`), as a database distributed by
person needs. Statements the scenario harness itself sends are left out.

It covers what the week exercises; the test fails if that stops including a statement on
each per-person table, so the coverage cannot silently shrink.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import greenlet
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.scenarios.harness import Person, World
from tests.support.distribution import KNOWN_UNTIED, NOT_PER_PERSON
from tests.support.sql_people import check

ROOT = Path(__file__).resolve().parents[2]
OWN_CODE = tuple(str(ROOT / package) for package in ("memory", "bot", "scheduler", "adapters"))
TUESDAY = date(2026, 10, 20)


def _caller_is_the_companion() -> bool:
    """Whether the innermost project frame that issued this statement is the companion's
    own code (not the scenario harness). SQLAlchemy's asyncio layer runs the driver in a
    greenlet, so the awaiting frames are found through the parent greenlets."""
    frame: Any = sys._getframe(1)
    current: Any = greenlet.getcurrent()
    while True:
        while frame is not None:
            name = frame.f_code.co_filename
            if name == __file__:  # the recorder itself
                frame = frame.f_back
                continue
            if name.startswith(OWN_CODE):
                return True
            if name.startswith(str(ROOT / "tests")):
                return False
            frame = frame.f_back
        current = current.parent
        if current is None:
            return False
        frame = current.gr_frame


@contextmanager
def recording() -> Iterator[dict[str, set[tuple[Any, ...]]]]:
    """Every distinct SQL statement the companion sends inside the block, with the
    distinct parameter values it was executed with."""
    seen: dict[str, set[tuple[Any, ...]]] = {}

    def record(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool
    ) -> None:
        if _caller_is_the_companion():
            values = tuple(parameters) if isinstance(parameters, tuple | list) and not many else ()
            seen.setdefault(statement, set()).add(tuple(repr(v) for v in values))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


async def _a_week(world: World, maya: Person, tomas: Person, aiko: Person) -> None:
    world.model.extractor.add(
        "interview",
        content="The person has a job interview at Brightline",
        category="event",
        tier="active",
        importance=8,
        event_date="2026-10-22T10:00",
    )
    await world.advance_to(aiko.at(date(2026, 10, 19), "16:05"))
    await aiko.says("/timezone Tokyo")
    await aiko.says("hello! I'm Aiko")
    await world.advance_to(tomas.at(TUESDAY, "10:00"))
    await tomas.says("/timezone Lisbon")
    await tomas.says("I'm Tomás, I study architecture at Técnico")
    await world.advance(minutes=2)
    await tomas.says("my ex Rafael keeps texting me late at night and it wrecks my sleep")
    await world.advance_to(aiko.at(TUESDAY, "19:00"))
    await aiko.says("I have a job interview at Brightline on Thursday at 10, kind of nervous")
    await world.advance_to(maya.at(TUESDAY, "10:00"))
    await maya.says("/timezone Los Angeles")
    await maya.says("hi, I'm Maya, a nurse on night shifts")
    await world.advance(hours=2)
    for person in (maya, tomas, aiko):
        await person.says("hey again")
        listing = await person.says("/memory")
        if "[" in listing.text:
            label = listing.text.split("[", 1)[1].split("]", 1)[0]
            await person.says(f"/forget {label}")
        await person.says("/diary")
        await person.says("/settings")
    await maya.says("/pause")
    await world.advance(days=1)
    await maya.says("/resume")
    await world.advance_to(aiko.at(TUESDAY + timedelta(days=3), "20:00"))
    await aiko.says("it went well I think! second round next week")
    for person in (maya, tomas):
        await person.says("long day, glad it's over")
    await world.advance(days=3)


@pytest.mark.parametrize("world", ["anthropic"], indirect=True)
@pytest.mark.timeout(600)
async def test_no_statement_reads_two_peoples_rows_together(
    world: World, maya: Person, tomas: Person, aiko: Person
) -> None:
    with recording() as statements:
        await _a_week(world, maya, tomas, aiko)

    untied, covered = [], set()
    for sql, executions in sorted(statements.items()):
        verdicts = [check(sql, params) for params in executions]
        covered.update(verdicts[0].tables)
        if not all(v.tied for v in verdicts):
            untied.append(f"{sorted(set(verdicts[0].tables))}: {' '.join(sql.split())}")
    known = {key for key in KNOWN_UNTIED if any(key in u for u in untied)}
    unknown = [u for u in untied if not any(key in u for key in KNOWN_UNTIED)]
    assert unknown == [], "statements that read two per-person tables untied:\n" + "\n".join(
        unknown
    )
    assert known == set(KNOWN_UNTIED), (
        f"fixed, remove from KNOWN_UNTIED: {set(KNOWN_UNTIED) - known}"
    )
    from memory.store.tables import Base

    per_person = set(Base.metadata.tables) - set(NOT_PER_PERSON)
    # no chat import, no /link, no question about a memory and no memory panel happen in
    # this week
    unopened = {"imports", "link_attempts", "memory_questions", "panel_links", "panel_sessions"}
    unexercised = per_person - covered - unopened
    assert unexercised == set(), f"the week no longer reads {sorted(unexercised)}"
    assert len(statements) > 60  # the recorder sees the companion's statements (98 in 2026-11)
