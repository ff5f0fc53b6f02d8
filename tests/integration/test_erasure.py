"""`/forget all` on real PostgreSQL: after the confirmation button, the database holds no
row of the person in any table, as PostgreSQL's own catalog lists the tables; everyone
else's rows are untouched."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.domain import ButtonPress, IncomingMessage
from memory.store.items import content_hash
from memory.store.panel_access import SqlPanelAccess
from memory.store.tables import (
    DiaryEntry,
    HeldNotice,
    Memory,
    MemoryQuestion,
    Outreach,
    Thread,
    TurnClaim,
)
from tests.conftest import FakeClock
from tests.integration.test_linking import CODE
from tests.support.catalog import (
    NOT_BY_USER_ID,
    public_tables,
    rows_mentioning,
    rows_per_table,
    tables_with_user_id,
    user_id_of,
)
from tests.support.commands import button, press, remember, run, send_file


async def seed_everything(core: Core, clock: FakeClock, user: str) -> int:
    """At least one row of `user` in every table, each marked with the word Zephyr."""
    # memories, memory events, buttons
    await remember(core, f"{user} lives on a boat called Zephyr", user=user)
    await run(core, "the Zephyr needs new sails", user)  # sessions, messages
    await run(core, "/forget Zephyr", user)  # a memory in the trash, hidden messages
    await remember(core, f"{user} sails the Zephyr on Sundays", user=user)
    await send_file(core, "notes.txt", b"I painted the Zephyr blue\n", user)  # imports
    await run(core, "/link", user)  # a link code and the try it counts
    user_id = await user_id_of(core.sessions, user)
    async with core.sessions.begin() as db:  # no command writes these: the scheduler does
        db.add(Thread(user_id=user_id, title="Fixing the Zephyr", session_ids=[1]))
        db.add(
            Outreach(
                user_id=user_id,
                kind="checkin",
                idempotency_key=f"checkin:{user_id}:2026-03-02",
                status="sent",
                due_at=clock.now(),
                text="How is the Zephyr?",
            )
        )
        db.add(HeldNotice(user_id=user_id, text="The Zephyr?", created_at=clock.now()))
        db.add(
            DiaryEntry(
                user_id=user_id,
                local_date=date(2026, 3, 1),
                lines=["We talked about the Zephyr."],
                notes_to_self=["Ask about the Zephyr's sails."],
                created_at=clock.now(),
            )
        )
        sails = await db.scalar(  # extraction asks this when they contradict it
            select(Memory.id).where(Memory.user_id == user_id, Memory.status == "active")
        )
        assert sails is not None
        db.add(
            MemoryQuestion(
                user_id=user_id,
                memory_id=sails,
                content="The person sails the Zephyr on Mondays now",
                content_hash=content_hash("The person sails the Zephyr on Mondays now"),
                category="fact",
                tier="core",
                importance=6,
                confidence=0.9,
                created_at=clock.now(),
            )
        )
    async with core.sessions.begin() as db:  # a turn being answered, across processes
        db.add(TurnClaim(user_id=user_id, holder="process-1", expires_at=clock.now()))
    panel = SqlPanelAccess(core.sessions)  # the memory panel's sign-ins and sessions
    later = clock.now() + timedelta(minutes=10)
    await panel.issue_link(
        user_id=user_id, digest=f"link-{user}", expires_at=later, now=clock.now()
    )
    await panel.open_session(
        user_id=user_id, digest=f"session-{user}", csrf="c", expires_at=later, now=clock.now()
    )
    return user_id


async def test_the_catalog_lists_no_table_outside_the_person_tables_and_the_allow_list(
    db: async_sessionmaker[AsyncSession],
) -> None:
    scoped = set(await tables_with_user_id(db))
    unscoped = set(await public_tables(db)) - scoped
    assert unscoped <= set(NOT_BY_USER_ID), f"tables with no user_id: {unscoped}"
    assert {"messages", "memories", "diary_entries"} <= scoped  # the catalog query works


async def test_forget_all_leaves_no_row_of_the_person_in_any_table(
    core: Core, clock: FakeClock
) -> None:
    alice = await seed_everything(core, clock, "alice")
    bob = await seed_everything(core, clock, "bob")
    before = await rows_per_table(core.sessions, alice)
    bobs_before = await rows_per_table(core.sessions, bob)
    # The seed reaches every table the catalog knows: a new table fails here until the
    # seed (and, if need be, the erase code) covers it.
    assert all(before.values()), f"not seeded: {[t for t, n in before.items() if not n]}"
    assert all(bobs_before.values())

    confirm = await run(core, "/forget all")
    assert "2 memories" in confirm.text and "cannot be undone" in confirm.text
    assert "1 diary entries" in confirm.text and "1 check-ins I sent" in confirm.text
    assert "nothing was erased" in (await press(core, confirm, "Cancel")).text
    kept = await rows_per_table(core.sessions, alice)
    assert {t: n for t, n in kept.items() if t != "button_actions"} == {
        t: n for t, n in before.items() if t != "button_actions"
    }  # cancelling erased nothing (only the confirmation's own buttons came and went)

    confirm = await run(core, "/forget all")
    assert (await press(core, confirm, "Yes", user="bob")).text == STALE_BUTTON
    assert "erased everything" in (await press(core, confirm, "Yes")).text
    # Pressing it again is stale, and does not bring the person back as a new row.
    assert (await press(core, confirm, "Yes")).text == STALE_BUTTON

    after = await rows_per_table(core.sessions, alice)
    assert set(after) == set(before)
    assert {table: n for table, n in after.items() if n} == {}
    assert await rows_mentioning(core.sessions, "alice") == {}  # not even a new identity
    assert await rows_per_table(core.sessions, bob) == bobs_before
    assert set(await rows_mentioning(core.sessions, "Zephyr")) >= {
        "memories",
        "messages",
        "threads",
        "outreach",
        "diary_entries",
    }  # Bob's, all still there


async def test_forget_all_from_a_linked_account_erases_every_account_of_the_person(
    core: Core, clock: FakeClock
) -> None:
    alice = await seed_everything(core, clock, "alice")
    bob = await seed_everything(core, clock, "bob")
    bobs_before = await rows_per_table(core.sessions, bob)
    code = CODE.search((await run(core, "/link")).text)
    assert code is not None
    telegram = IncomingMessage("telegram", "alice-tg", "", chat_id="tg-alice")
    await core.router.handle(replace(telegram, text="/remember the Zephyr is blue"))
    linked = await core.router.handle(replace(telegram, text=f"/link {code.group(1)}"))
    assert "now one person" in linked.text
    assert await user_id_of(core.sessions, "alice-tg") == alice

    confirm = await core.router.handle(replace(telegram, text="/forget all"))
    yes = button(confirm, "Yes").action
    assert (
        "erased everything"
        in (await core.router.press(ButtonPress("telegram", "alice-tg", yes))).text
    )
    assert {
        table: n for table, n in (await rows_per_table(core.sessions, alice)).items() if n
    } == {}
    assert await rows_mentioning(core.sessions, "alice") == {}  # neither account is left
    assert await rows_per_table(core.sessions, bob) == bobs_before
