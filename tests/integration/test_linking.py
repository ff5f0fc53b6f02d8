"""`/link` on real PostgreSQL: a code asked for on one platform joins the account on the
other into one person (memories reconciled, the older settings kept unless the person
picks, one check-in a day where they choose); wrong, expired, used and rate-limited codes
and codes in a group change nothing; `/unlink` takes an account out again."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import time, timedelta

from sqlalchemy import func, select, update

from bot.bootstrap import Core
from bot.commands.linking import PRIVATE_ONLY, REFUSALS, VOIDED
from bot.domain import ButtonPress, IncomingMessage, Reply
from memory.care.linking import Refusal
from memory.store.tables import (
    DiaryEntry,
    Identity,
    LinkAttempt,
    LinkCode,
    Memory,
    MemoryEvent,
    Message,
    Outreach,
    User,
)
from scheduler.checkins import minute_tick
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.integration.test_scheduler_support import drafts, recording, scheduler_deps
from tests.support.catalog import rows_mentioning, rows_per_table
from tests.support.commands import button

CODE = re.compile(r"\b([A-HJKMNP-Z2-9]{4}-[A-HJKMNP-Z2-9]{4})\b")


async def send(
    core: Core, platform: str, text: str, user: str = "alice", *, private: bool = True
) -> Reply:
    """`user`'s account on `platform` sends `text`."""
    chat = f"{platform}-{user}" if private else f"{platform}-group"
    incoming = IncomingMessage(
        platform, f"{user}-{platform}", text, chat_id=chat, display_name=user, is_private=private
    )
    return await core.router.handle(incoming)


async def tap(core: Core, platform: str, reply: Reply, label: str, user: str = "alice") -> Reply:
    """`user` presses a button under `reply` on `platform`."""
    action = button(reply, label).action
    press = ButtonPress(platform, f"{user}-{platform}", action, chat_id=f"{platform}-{user}")
    return await core.router.press(press)


async def code_for(core: Core, platform: str, user: str = "alice") -> str:
    """A fresh code asked for on `platform`."""
    reply = await send(core, platform, "/link", user)
    assert reply.private
    found = CODE.search(reply.text)
    assert found is not None, reply.text
    return found.group(1)


async def owner(core: Core, platform: str, user: str = "alice") -> int:
    """The person behind `user`'s account on `platform`."""
    async with core.sessions() as db:
        found = await db.scalar(
            select(Identity.user_id).where(
                Identity.platform == platform, Identity.platform_user_id == f"{user}-{platform}"
            )
        )
    assert found is not None
    return found


async def linked_pair(core: Core, clock: FakeClock, user: str = "alice") -> Reply:
    """`user` on Telegram (first) and Discord, linked; the reply to `/link CODE`."""
    await send(core, "telegram", "/remember I have a cat named Miso", user)
    clock.advance(minutes=1)
    await send(core, "discord", "/remember I play the cello", user)
    code = await code_for(core, "telegram", user)
    return await send(core, "discord", f"/link {code.lower()}", user)


async def test_a_code_joins_two_platforms_into_one_person_with_memories_reconciled(
    core: Core, clock: FakeClock
) -> None:
    await send(core, "telegram", "/timezone Europe/Paris")
    for fact in ("I have a cat named Miso", "I live in Paris"):
        await send(core, "telegram", f"/remember {fact}")
    clock.advance(minutes=5)
    await send(core, "discord", "/timezone America/New_York")
    for fact in ("I have a cat named Miso", "I live in Berlin", "I play the cello"):
        await send(core, "discord", f"/remember {fact}")
    telegram, discord = await owner(core, "telegram"), await owner(core, "discord")

    code = await code_for(core, "telegram")
    async with core.sessions() as db:  # only its hash is stored
        stored = await db.scalar(select(LinkCode.code_hash))
    assert stored is not None and code not in stored and code.replace("-", "") not in stored
    assert await rows_mentioning(core.sessions, code.replace("-", "")) == {}

    linked = await send(core, "discord", f"/link {code}")
    assert linked.private and "Discord and Telegram are now one person" in linked.text
    assert "1 memory was the same" in linked.text
    assert "I live in Paris" in linked.text and "I live in Berlin" in linked.text  # a conflict
    assert "Europe/Paris" in linked.text  # the older account's settings stay
    assert await owner(core, "discord") == telegram
    assert await rows_per_table(core.sessions, discord) == dict.fromkeys(
        await rows_per_table(core.sessions, discord), 0
    )  # nothing left of the newer person

    listing = (await send(core, "discord", "/memory")).text
    assert listing.count("cat named Miso") == 1
    assert "Paris" in listing and "Berlin" in listing and "cello" in listing
    async with core.sessions() as db:
        merged = await db.scalar(
            select(Memory).where(Memory.user_id == telegram, Memory.superseded_by.is_not(None))
        )
        actions = set(await db.scalars(select(MemoryEvent.action)))
        said = select(Message.platform).where(Message.user_id == telegram)
        platforms = set(await db.scalars(said))
        ids = select(Memory.short_id).where(Memory.user_id == telegram)
        short_ids = list(await db.scalars(ids))
    assert merged is not None and "Miso" in merged.content  # kept in history
    assert {"merge", "link_conflict"} <= actions
    assert platforms == {"telegram", "discord"}  # messages keep their platform
    assert sorted(short_ids) == list(range(1, 6))

    exported = await send(core, "discord", "/export")
    assert exported.document is not None
    data = json.loads(exported.document.content)
    assert {i["platform"] for i in data["identities"]} == {"telegram", "discord"}
    assert "link_codes" not in data and "link_attempts" not in data

    chosen = await tap(core, "discord", linked, "Use Discord's settings")
    assert "America/New_York" in chosen.text
    assert (await send(core, "telegram", "/settings")).text == chosen.text  # one person


async def test_one_checkin_a_day_goes_to_the_platform_the_person_picks(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    await send(core, "telegram", "/help")
    clock.advance(minutes=1)
    await send(core, "discord", "/timezone UTC")  # only the newer account chose one
    linked = await linked_pair(core, clock)
    assert "Timezone: UTC  " in (await send(core, "telegram", "/settings")).text
    await send(core, "discord", "/pause")  # settings apply to the person everywhere
    assert "paused" in (await send(core, "telegram", "/settings")).text
    await send(core, "telegram", "/resume")
    assert "on Discord" in (await tap(core, "telegram", linked, "Check-ins on Discord")).text
    again = await send(core, "telegram", "/link")  # a new code, and where things stand
    assert "Linked now: Telegram, Discord. Check-ins go to Discord." in again.text
    assert CODE.search(again.text) is not None and button(again, "Check-ins on Telegram")
    sent = {p: recording(core, p) for p in ("telegram", "discord")}
    drafts(scripted_llm, message="Morning!")
    clock.current = clock.current.replace(hour=9, minute=0, second=30) + timedelta(days=1)
    await minute_tick(scheduler_deps(core))
    clock.advance(hours=6)
    await minute_tick(scheduler_deps(core))
    assert [r.platform for r, _ in sent["discord"].sent] == ["discord"]
    assert sent["telegram"].sent == []


async def test_wrong_expired_used_and_rate_limited_codes_change_nothing(
    core: Core, clock: FakeClock
) -> None:
    await send(core, "telegram", "/remember I have a cat named Miso")
    await send(core, "discord", "/remember I play the cello")
    telegram, discord = await owner(core, "telegram"), await owner(core, "discord")
    code = await code_for(core, "telegram")

    async def unchanged() -> None:
        assert await owner(core, "telegram") == telegram
        assert await owner(core, "discord") == discord

    assert (await send(core, "discord", "/link 2222-2222")).text == REFUSALS[Refusal.WRONG]
    assert (await send(core, "discord", "/link not a code")).text == REFUSALS[Refusal.WRONG]
    assert (await send(core, "telegram", f"/link {code}")).text == REFUSALS[Refusal.OWN]
    await unchanged()
    clock.advance(minutes=11)
    assert (await send(core, "discord", f"/link {code}")).text == REFUSALS[Refusal.EXPIRED]
    await unchanged()

    for _ in range(2):  # five wrong tries a quarter of an hour: the right code waits too
        await send(core, "discord", "/link 3333-3333")
    fresh = await code_for(core, "telegram")
    refused = await send(core, "discord", f"/link {fresh}")
    assert "Too many wrong codes" in refused.text and "in 4 minutes" in refused.text
    await unchanged()
    clock.advance(minutes=5)  # the first two wrong tries no longer count; the code still works
    assert "are now one person" in (await send(core, "discord", f"/link {fresh}")).text
    await send(core, "discord", "/remember Bob's own", "bob")
    assert (await send(core, "discord", f"/link {fresh}", "bob")).text == REFUSALS[Refusal.USED]

    for _ in range(3):  # five codes an hour (two were asked for above)
        await code_for(core, "telegram")
    assert "Try again in" in (await send(core, "telegram", "/link")).text
    clock.advance(days=2)  # old codes and tries are deleted as new ones come
    await code_for(core, "telegram")
    async with core.sessions() as db:
        assert await db.scalar(select(func.count()).select_from(LinkCode)) == 1
        assert await db.scalar(select(func.count()).select_from(LinkAttempt)) == 1


async def test_a_code_sent_from_two_accounts_at_once_links_only_one(
    core: Core, clock: FakeClock
) -> None:
    await send(core, "discord", "/remember I play the cello")
    await send(core, "console", "/remember I play the cello")
    code = await code_for(core, "telegram")
    answers = await asyncio.gather(
        send(core, "discord", f"/link {code}"), send(core, "console", f"/link {code}")
    )
    assert sorted("now one person" in a.text for a in answers) == [False, True]
    assert REFUSALS[Refusal.USED] in [a.text for a in answers]
    people = {await owner(core, p) for p in ("telegram", "discord", "console")}
    assert len(people) == 2


async def test_codes_are_never_given_or_taken_in_a_group(core: Core, clock: FakeClock) -> None:
    assert (await send(core, "telegram", "/link", private=False)).text == PRIVATE_ONLY
    async with core.sessions() as db:
        assert await db.scalar(select(func.count()).select_from(LinkCode)) == 0
    code = await code_for(core, "telegram")
    shown = await send(core, "discord", f"/link {code}", private=False)
    assert shown.text == VOIDED and shown.private
    after = await send(core, "discord", f"/link {code}")  # void now, even privately
    assert after.text == REFUSALS[Refusal.VOID]
    tried = await code_for(core, "telegram")
    for _ in range(3):  # refused from its own account three times: void too
        assert (await send(core, "telegram", f"/link {tried}")).text == REFUSALS[Refusal.OWN]
    assert (await send(core, "discord", f"/link {tried}")).text == REFUSALS[Refusal.VOID]
    assert await owner(core, "discord") != await owner(core, "telegram")


async def test_unlink_takes_the_account_out_into_a_fresh_person(
    core: Core, clock: FakeClock
) -> None:
    await linked_pair(core, clock)
    person = await owner(core, "telegram")
    confirm = await send(core, "discord", "/unlink")
    assert "Cancelled" in (await tap(core, "discord", confirm, "Cancel")).text
    assert await owner(core, "discord") == person
    confirm = await send(core, "discord", "/unlink")
    assert "new person" in (await tap(core, "discord", confirm, "Unlink Discord")).text
    fresh = await owner(core, "discord")
    assert fresh != person
    assert "cello" in (await send(core, "telegram", "/memory")).text
    assert "cello" not in (await send(core, "discord", "/memory")).text
    assert "nothing to unlink" in (await send(core, "discord", "/unlink")).text
    async with core.sessions() as db:
        outreach = await db.scalar(
            select(Identity.platform).where(Identity.user_id == person, Identity.outreach)
        )
        settings = await db.get_one(User, fresh)
    assert outreach == "telegram"
    assert settings.checkin_time == time(9)


async def test_forget_all_on_one_platform_erases_every_linked_account(
    core: Core, clock: FakeClock
) -> None:
    await linked_pair(core, clock)
    await linked_pair(core, clock, "bob")
    person, bob = await owner(core, "telegram"), await owner(core, "telegram", "bob")
    bobs = await rows_per_table(core.sessions, bob)
    confirm = await send(core, "discord", "/forget all")
    assert "erased everything" in (await tap(core, "discord", confirm, "Yes")).text
    assert {t: n for t, n in (await rows_per_table(core.sessions, person)).items() if n} == {}
    assert await rows_mentioning(core.sessions, "alice-telegram") == {}
    assert await rows_mentioning(core.sessions, "alice-discord") == {}
    assert await rows_per_table(core.sessions, bob) == bobs


async def test_a_checkin_sent_today_on_the_newer_account_counts_for_the_joined_person(
    core: Core, clock: FakeClock, scripted_llm: ScriptedLLM
) -> None:
    await send(core, "telegram", "/timezone UTC")
    clock.advance(minutes=1)
    await send(core, "discord", "/timezone UTC")
    telegram, discord = await owner(core, "telegram"), await owner(core, "discord")
    today = clock.now().date()
    async with core.sessions.begin() as db:
        for person, line in ((telegram, "Talked about Miso."), (discord, "Talked about cello.")):
            db.add(
                DiaryEntry(user_id=person, local_date=today, lines=[line], created_at=clock.now())
            )
        db.add(
            Outreach(
                user_id=discord,
                kind="checkin",
                idempotency_key=f"checkin:{discord}:{today.isoformat()}",
                status="sent",
                due_at=clock.now(),
                sent_at=clock.now(),
            )
        )
    code = await code_for(core, "telegram")
    assert "now one person" in (await send(core, "discord", f"/link {code}")).text

    async with core.sessions.begin() as db:
        entries = list(await db.scalars(select(DiaryEntry).where(DiaryEntry.user_id == telegram)))
        keys = list(await db.scalars(select(Outreach.idempotency_key)))
        await db.execute(
            update(User)
            .where(User.id == telegram)
            .values(next_checkin_at=clock.now() + timedelta(hours=1))
        )
    assert [e.lines for e in entries] == [["Talked about Miso.", "Talked about cello."]]
    assert keys == [f"checkin:{telegram}:{today.isoformat()}"]
    sent = recording(core, "telegram")
    drafts(scripted_llm)
    clock.advance(hours=1, seconds=30)
    await minute_tick(scheduler_deps(core))
    assert sent.sent == []  # today's check-in already went out, on Discord
