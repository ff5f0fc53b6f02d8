"""A graceful stop as a real process: `companion run` gets SIGTERM while a turn and a
check-in are with the model (the loopback Messages API holds both answers), and still
delivers that one reply and that one check-in, marks the message answered, confirms the
update to Telegram, takes no update that arrives after the signal, leaves no outreach row
half-sent and exits 0."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.store.conversations import SqlConversationStore
from memory.store.tables import Message, Outreach
from tests.fakes.anthropic_api import (
    DEFAULT_REPLY,
    FakeAnthropicAPI,
    Step,
    TextReply,
    ToolUseReply,
)
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.support.companion_process import RunningCompanion, companion_env
from tests.support.timezone_question import plain

ALICE = 4343
BOB = 5353
CAROL = 6363
REPLY = "Still here — I finished my sentence before going."
CHECKIN = "Morning, Bob! How did the move go?"


@dataclass
class HeldModel:
    """Answers turns and check-ins only once `release` is set; counts them as they come."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: Counter[str] = field(default_factory=Counter)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, body: dict[str, Any]) -> Step:
        tool = (body.get("tool_choice") or {}).get("name")
        kind = {None: "turn", "decide_checkin": "checkin"}.get(tool, "other")
        self.arrived[kind] += 1
        self.changed.set()
        if kind == "other":
            return TextReply(DEFAULT_REPLY)
        await self.release.wait()
        if kind == "checkin":
            return ToolUseReply("decide_checkin", {"send": True, "message": CHECKIN})
        return TextReply(REPLY)

    async def holding(self, *kinds: str, within: float = 15) -> None:
        """Wait until a request of each kind is being held."""
        async with asyncio.timeout(within):
            while not all(self.arrived[kind] for kind in kinds):
                self.changed.clear()
                await self.changed.wait()


async def _due_checkin(db: async_sessionmaker[AsyncSession], telegram_id: int) -> None:
    """A person on Telegram whose daily check-in fell due a minute ago (real time)."""
    store = SqlConversationStore(db)
    person = await store.ensure_person(
        platform="telegram",
        platform_user_id=str(telegram_id),
        chat_id=str(telegram_id),
        display_name="Bob",
    )
    now = datetime.now(UTC)
    await store.update_person(
        person.id,
        timezone="UTC",
        checkin_time=(now - timedelta(minutes=1)).time().replace(microsecond=0),
        quiet_start=None,
        quiet_end=None,
        next_checkin_at=now - timedelta(minutes=1),
    )


async def test_sigterm_mid_turn_finishes_the_turn_and_exits_cleanly(
    database_url: str, db: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    await _due_checkin(db, BOB)
    model = HeldModel()
    async with FakeAnthropicAPI(responder=model) as anthropic, FakeTelegramAPI() as telegram:
        telegram.start_chat(BOB, "Bob")
        env = companion_env(
            data_dir=tmp_path, database_url=database_url, anthropic=anthropic, telegram=telegram
        )
        bot = await RunningCompanion.start("run", env=env, cwd=tmp_path)
        try:
            await bot.log("telegram.started")
            telegram.push_message(ALICE, "are you still there?", first_name="Alice")
            (update_id,) = telegram.pending_updates
            await model.holding("turn", "checkin")

            bot.process.send_signal(signal.SIGTERM)
            await bot.log("run.stopping", within=5)
            await bot.log("telegram.receiving_stopped", within=5)
            assert telegram.sent[ALICE] == telegram.sent[BOB] == []  # both with the model
            telegram.push_message(CAROL, "hello? anyone?", first_name="Carol")
            late = [u for u in telegram.pending_updates if u != update_id]
            model.release.set()
            code = await bot.wait(within=20)
        finally:
            model.release.set()
            await bot.kill()
        assert code == 0, bot.stderr[-3000:]
        assert [plain(m.text) for m in telegram.sent[ALICE]] == [REPLY]
        assert [m.text for m in telegram.sent[BOB]] == [CHECKIN], bot.stderr[-3000:]
        assert (model.arrived["turn"], model.arrived["checkin"]) == (1, 1)
        assert telegram.confirmed_offset == update_id + 1
        # What arrived after the signal was neither taken nor answered: it waits for the
        # next start, while the check-in being written was still delivered.
        assert len(late) == 1 and telegram.pending_updates == late
        assert telegram.sent[CAROL] == []
    events = [entry["event"] for entry in bot.logs]
    assert events.index("run.stopping") < events.index("telegram.stopped")
    assert events[-1] == "run.stopped"
    async with db() as s:
        stored = (await s.scalars(select(Message).order_by(Message.id))).all()
        outreach = (await s.execute(select(Outreach.kind, Outreach.status))).all()
    alice = [(m.role, m.content, m.status) for m in stored if m.chat_id == str(ALICE)]
    assert alice == [
        ("user", "are you still there?", "answered"),
        ("assistant", REPLY, alice[1][2]),
    ]
    assert [tuple(row) for row in outreach] == [("checkin", "sent")]  # none left 'sending'
