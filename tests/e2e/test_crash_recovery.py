"""Crash recovery: the whole bot (Telegram adapter, scheduler jobs, extraction) SIGKILLed
twenty times at random points of a turn, an extraction and a check-in, restarted each
time while people keep writing; then the database and what the fakes received are checked
for lost, doubled or half-written work. The counts are reported in the terminal summary
(see `REPORT_PROPERTY` in `tests/conftest.py`), and at least one kill must have landed
while a turn, an extraction and a check-in were running.

Workers are forked from one child process that imported the bot once (see
`tests/support/crash_worker.py`), so a restart takes a fraction of a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from random import Random
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.conversations import SqlConversationStore
from memory.store.tables import Identity, Memory, MemoryEvent, Message, Outreach, User
from memory.store.tables import Session as SessionRow
from tests.conftest import REPORT_PROPERTY
from tests.fakes.anthropic_api import FakeAnthropicAPI
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.crash_harness import (
    CHECKIN,
    FACTS,
    Chatter,
    CrashModel,
    Zygote,
    fact_in,
    noticed_facts,
    replies_by_token,
)

SEED = 20261122
KILLS = 20
TARGETS = ("receive", "turn", "extraction", "checkin")
"""Where kills aim: just after Telegram handed updates to the bot, while the model answers
a turn, an extraction, a check-in."""
MUST_LAND = ("turn", "extraction", "checkin")
"""Targets at least one kill must hit while that work was running, or the run proved
nothing about it."""
CHATTERS = tuple(range(7001, 7007))
CHECKIN_PEOPLE = tuple(range(8001, 8017))
CHECKIN_SPACING = timedelta(seconds=1.5)
LEASE_SECONDS = 2.0
FINAL = ("sent", "skipped", "failed", "unknown")

Db = async_sessionmaker[AsyncSession]


@dataclass(frozen=True)
class Kill:
    """One SIGKILL: what it aimed at, whether that was running, what the model was doing."""

    target: str
    hit: bool
    in_flight: tuple[str, ...]


async def add_checkin_people(db: Db, telegram: FakeTelegramAPI, first_due: datetime) -> None:
    """People who never wrote, with check-ins falling due one after another."""
    store = SqlConversationStore(db)
    for n, person in enumerate(CHECKIN_PEOPLE):
        telegram.start_chat(person)
        found = await store.ensure_person(
            platform="telegram",
            platform_user_id=str(person),
            chat_id=str(person),
            display_name=f"Checkin {n}",
        )
        await store.update_person(
            found.id,
            timezone="UTC",
            checkin_time=time(9),
            quiet_start=None,
            quiet_end=None,
            next_checkin_at=first_due + CHECKIN_SPACING * n,
        )


async def busy(model: CrashModel, telegram: FakeTelegramAPI, kind: str, within: float) -> bool:
    """Wait until the bot is doing `kind` of work; False if it did not come to that."""
    polls = len(telegram.get_updates_calls)

    def doing() -> bool:
        if kind == "receive":
            return any(call.returned for call in telegram.get_updates_calls[polls:])
        return model.in_flight[kind] > 0

    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not doing():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


async def test_twenty_kills_lose_nothing_and_do_nothing_twice(
    database_url: str, db: Db, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    plan = Random(SEED)
    model = CrashModel(Random(SEED + 1))
    kills: list[Kill] = []
    async with (
        FakeAnthropicAPI(responder=model) as api,
        FakeTelegramAPI() as telegram,
        workers(tmp_path / "workers.log") as zygote,
    ):
        first_due = datetime.now(UTC) + timedelta(seconds=4)
        await add_checkin_people(db, telegram, first_due)
        config = {
            "database_url": database_url,
            "data_dir": str(tmp_path),
            "anthropic_url": api.base_url,
            "telegram_url": telegram.base_url,
            "lease_seconds": LEASE_SECONDS,
        }
        chatter = Chatter(telegram, Random(SEED + 2), CHATTERS)
        traffic = asyncio.create_task(chatter.run())
        try:
            for number in range(KILLS):
                pid = await zygote.spawn(config)
                target = TARGETS[number % len(TARGETS)]
                hit = await busy(model, telegram, target, within=1.5)
                await asyncio.sleep(plan.uniform(0, 0.05 if target == "receive" else 0.3))
                kills.append(Kill(target, hit, tuple(sorted(+model.in_flight))))
                assert await zygote.end(pid, signal.SIGKILL) == -signal.SIGKILL
                await asyncio.sleep(plan.uniform(0, 0.3))  # down a moment; people write on
        finally:
            chatter.running = False
            await traffic
        pid = await zygote.spawn(config)
        last_due = first_due + CHECKIN_SPACING * (len(CHECKIN_PEOPLE) - 1)
        await asyncio.sleep(max(0.0, (last_due - datetime.now(UTC)).total_seconds()))
        await settle(db, telegram, model, answered=False)
        left = await unanswered(db)
        await chatter.last_words()
        await settle(db, telegram, model, answered=True)
        assert await zygote.end(pid, signal.SIGTERM) == 0

    counts, problems = await check(db, telegram, chatter, kills)
    counts["stored when the bot died, unanswered after the restart"] = left
    report = "\n".join(f"  {name}: {value}" for name, value in counts.items())
    record_property(REPORT_PROPERTY, f"crash recovery, seed {SEED}:\n{report}")
    assert problems == [], "\n".join([*problems, "counts:", report, _log_tail(tmp_path)])
    missed = [t for t in MUST_LAND if not any(k.target == t and k.hit for k in kills)]
    assert missed == [], f"no kill landed while the bot was busy on {missed}:\n{report}"


@contextlib.asynccontextmanager
async def workers(log: Path) -> AsyncIterator[Zygote]:
    """The forking child process; every worker is gone when the block ends."""
    zygote = Zygote(log)
    await zygote.start()
    try:
        yield zygote
    finally:
        await zygote.close()


async def settle(
    db: Db, telegram: FakeTelegramAPI, model: CrashModel, *, answered: bool, within: float = 8
) -> None:
    """Wait until the last worker has caught up: nothing waiting at Telegram or the model,
    every check-in decided and (if `answered`) every stored message answered; or time up."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    calm = 0
    while calm < 3 and loop.time() < deadline:
        quiet = not telegram.pending_updates and not +model.in_flight
        done = await _checkins_done(db) and (not answered or await unanswered(db) == 0)
        calm = calm + 1 if quiet and done else 0
        await asyncio.sleep(0.2)


async def _checkins_done(db: Db) -> bool:
    async with db() as s:
        open_rows = await s.scalar(select(Outreach.id).where(Outreach.status.not_in(FINAL)))
        due = await s.scalar(select(User.id).where(User.next_checkin_at <= datetime.now(UTC)))
    return open_rows is None and due is None


async def unanswered(db: Db) -> int:
    """How many stored messages of people wait for an answer."""
    async with db() as s:
        found = await s.scalar(
            select(func.count()).where(Message.role == "user", Message.status != "answered")
        )
    return int(found or 0)


async def check(
    db: Db, telegram: FakeTelegramAPI, chatter: Chatter, kills: list[Kill]
) -> tuple[dict[str, Any], list[str]]:
    """The counts of the run and every broken promise found."""
    counts: dict[str, Any] = {
        "kills": len(kills),
        "kills aimed at / landing while it ran": {
            t: f"{sum(k.target == t for k in kills)}/{sum(k.target == t and k.hit for k in kills)}"
            for t in TARGETS
        },
        "kills with the model busy on": dict(Counter(i for k in kills for i in k.in_flight)),
    }
    problems: list[str] = []
    for part in (_inbound, _outreach, _memories):
        found, broken = await part(db, telegram, chatter)
        counts.update(found)
        problems += broken
    return counts, problems


async def _inbound(
    db: Db, telegram: FakeTelegramAPI, chatter: Chatter
) -> tuple[dict[str, Any], list[str]]:
    """Every message sent is stored once and answered once."""
    async with db() as s:
        rows = (await s.scalars(select(Message).where(Message.role == "user"))).all()
    stored = Counter((int(m.chat_id or 0), int(m.platform_message_id or 0)) for m in rows)
    lost = [chatter.pushed[key] for key in chatter.pushed if key not in stored]
    twice_stored = [key for key, n in stored.items() if n > 1]
    unanswered = [m.content for m in rows if m.status != "answered"]
    replies = replies_by_token(telegram, CHATTERS)
    answered_twice = sorted(token for (_, token), n in replies.items() if n > 1)
    kept = {token for key, token in chatter.pushed.items() if key in stored}
    no_reply = sorted(kept - {token for _, token in replies})
    counts = {
        "messages sent by people": len(chatter.pushed),
        "stored": sum(stored.values()),
        "lost (sent, never stored)": len(lost),
        "stored twice": len(twice_stored),
        "answered twice": len(answered_twice),
        "stored but left unanswered": len(unanswered),
        "stored, but no reply mentioning it was ever delivered": len(no_reply),
    }
    problems = [f"inbound message lost: {token}" for token in lost]
    problems += [f"inbound message stored twice: {key}" for key in twice_stored]
    problems += [f"message answered twice: {token}" for token in answered_twice]
    problems += [f"message never answered: {content!r}" for content in unanswered]
    return counts, problems


async def _outreach(
    db: Db, telegram: FakeTelegramAPI, chatter: Chatter
) -> tuple[dict[str, Any], list[str]]:
    """One check-in row per person, none delivered twice, every row final."""
    async with db() as s:
        rows = (await s.scalars(select(Outreach).order_by(Outreach.id))).all()
        chats = dict((await s.execute(select(Identity.user_id, Identity.platform_user_id))).all())
    delivered = {p: sum(m.text == CHECKIN for m in telegram.sent[p]) for p in CHECKIN_PEOPLE}
    per_person = Counter(int(chats[r.user_id]) for r in rows)
    counts = {
        "check-ins due": len(CHECKIN_PEOPLE),
        "check-in rows by status": dict(Counter(r.status for r in rows)),
        "check-ins delivered": sum(delivered.values()),
    }
    problems = [f"check-in delivered {n} times to {p}" for p, n in delivered.items() if n > 1]
    problems += [f"{n} outreach rows for {who}" for who, n in per_person.items() if n > 1]
    problems += [f"outreach row {r.id} left {r.status}" for r in rows if r.status not in FINAL]
    problems += [
        f"outreach row {r.id} is sent but was not delivered"
        for r in rows
        if r.status == "sent" and delivered.get(int(chats[r.user_id])) == 0
    ]
    missing = len(CHECKIN_PEOPLE) - len(rows)
    if missing > 0:
        problems.append(f"{missing} due check-ins were never claimed")
    return counts, problems


async def _memories(
    db: Db, telegram: FakeTelegramAPI, chatter: Chatter
) -> tuple[dict[str, Any], list[str]]:
    """Memories and watermarks commit together; nothing is learned or noticed twice."""
    async with db() as s:
        memories = (await s.scalars(select(Memory))).all()
        events = {e.memory_id for e in (await s.scalars(select(MemoryEvent))).all()}
        messages = {m.id: m for m in (await s.scalars(select(Message))).all()}
        marks = dict((await s.execute(select(SessionRow.id, SessionRow.extracted_through))).all())
    learned = {(m.user_id, m.content, source) for m in memories for source in m.source_message_ids}
    extracted = [
        m
        for m in messages.values()
        if m.role == "user"
        and (marks.get(m.session_id) or 0) >= m.id
        and fact_in(m.content) is not None
    ]
    problems = [f"memory {m.id} has no event" for m in memories if m.id not in events]
    problems += [
        f"message {m.id} is behind the watermark but its fact was not stored"
        for m in extracted
        if (m.user_id, FACTS[fact_in(m.content) or 0], m.id) not in learned
    ]
    problems += [
        f"memory {memory.id} stored without its watermark moving past message {source}"
        for memory in memories
        for source in memory.source_message_ids
        if (marks.get(messages[source].session_id) or 0) < source
    ]
    live = Counter((m.user_id, m.content) for m in memories if m.valid_until is None)
    problems += [f"{content!r} stored {n} times" for (_, content), n in live.items() if n > 1]
    notices = noticed_facts(telegram, CHATTERS)
    problems += [f"{fact!r} noticed {n} times" for (_, fact), n in notices.items() if n > 1]
    counts = {
        "facts said": sum(
            fact_in(m.content) is not None for m in messages.values() if m.role == "user"
        ),
        "facts behind the watermark": len(extracted),
        "memories": len(memories),
        "memory notices sent": sum(notices.values()),
    }
    return counts, problems


def _log_tail(tmp_path: Path, lines: int = 40) -> str:
    log = tmp_path / "workers.log"
    tail = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else []
    return "workers.log (tail):\n" + "\n".join(tail)
