"""Everything the companion says on its own outside a turn (memory notices, questions
about what it noted) goes through here: at once when the person's allowed window is open,
else held in the database until it opens, merged into one notice, dropped when stale,
and never sent while they pause (held notices wait for /resume and go stale meanwhile).

The window is closed while the person is paused, in their quiet hours, or has not told
the companion their timezone yet (quiet hours mean nothing without it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

import structlog

from bot.commands.base import CommandDeps
from bot.commands.notices import AWAY_HEADING, memory_notice
from bot.domain import Button, Reply
from bot.errors import DeliveryFailed
from bot.outbound import Outbound
from bot.timing import in_quiet_hours
from memory.store import held_notices
from memory.store.database import Database
from memory.store.held_notices import Held, Window
from memory.store.items import MemoryItem
from memory.store.ports import Clock
from memory.store.records import Person

log = structlog.get_logger(__name__)

STALE_AFTER = timedelta(hours=36)


def closed_reason(window: Window, now: datetime) -> str | None:
    """Why the person may not be written to on the companion's own initiative now, or
    None when their window is open."""
    if window.paused:
        return "paused"
    if not window.timezone_known:
        return "timezone_unknown"
    if in_quiet_hours(now, window.timezone, window.quiet_start, window.quiet_end):
        return "quiet_hours"
    return None


class NoticeWindow:
    """Sends, holds and releases what the companion says on its own."""

    def __init__(
        self,
        *,
        sessions: Database,
        commands: CommandDeps,
        outbound: Outbound,
        clock: Clock,
        stale_after: timedelta = STALE_AFTER,
    ) -> None:
        self._sessions = sessions
        self._commands = commands
        self._outbound = outbound
        self._clock = clock
        self._stale_after = stale_after

    async def send_or_hold(
        self, person: Person, *, items: Sequence[MemoryItem] = (), reply: Reply | None = None
    ) -> str:
        """A memory notice about `items`, or `reply`: sent now when the window is open,
        else held; returns 'sent', 'held', 'failed' or 'gone'."""
        window = await held_notices.window_of(self._sessions, person.id)
        if window is None:
            return "gone"
        reason = closed_reason(window, self._clock.now())
        if reason is not None:
            await held_notices.hold(
                self._sessions,
                user_id=person.id,
                now=self._clock.now(),
                memory_ids=[item.id for item in items],
                text_=reply.text if reply is not None else "",
                buttons=_pairs(reply.buttons) if reply is not None else (),
            )
            log.info("notice.held", reason=reason, items=len(items))
            return "held"
        notice = reply if reply is not None else await memory_notice(self._commands, person, items)
        return await self._send(person.id, notice)

    async def _send(self, user_id: int, notice: Reply) -> str:
        try:
            await self._outbound.send(user_id, notice)
        except DeliveryFailed as exc:
            log.info("memory.notice_not_delivered", reason=exc.reason)
            return "failed"
        return "sent"

    async def release(self, *, limit: int = 200) -> Counter[str]:
        """Drop stale held notices, then send the rest of everyone whose window is open
        (one merged memory notice per person, then any other held message); counts."""
        now = self._clock.now()
        outcomes: Counter[str] = Counter()
        dropped = await held_notices.drop_stale(self._sessions, before=now - self._stale_after)
        if dropped:
            outcomes["stale"] += dropped
        after: tuple[datetime, int] | None = None
        while True:
            groups, after = await held_notices.claim_open(
                self._sessions,
                is_open=lambda w: closed_reason(w, now) is None,
                after=after,
                limit=limit,
            )
            people = {
                p.id: p
                for p in await self._commands.store.persons_by_ids([w.user_id for w, _ in groups])
            }
            for window, rows in groups:
                person = people.get(window.user_id)
                if person is not None:
                    outcomes += await self._release_one(person, rows)
            if after is None:
                break
        if outcomes:
            log.info("notice.released", **outcomes)
        return outcomes

    async def _release_one(self, person: Person, rows: Sequence[Held]) -> Counter[str]:
        """One person's held notices: the memories still live, merged under one heading
        with fresh Undo buttons; other messages as they were."""
        outcomes: Counter[str] = Counter()
        now = self._clock.now()
        notes = [r for r in rows if r.memory_ids]
        ids = [m for r in notes for m in r.memory_ids] if person.memory_notices else []
        items = await held_notices.live_items(self._sessions, person.id, ids)
        if notes and not items:
            await held_notices.close(
                self._sessions, [r.id for r in notes], status="dropped", now=now, reason="gone"
            )
            outcomes["dropped"] += len(notes)
        elif notes:
            notice = await memory_notice(self._commands, person, items, heading=AWAY_HEADING)
            outcomes[await self._finish(person.id, notes, notice)] += len(notes)
        for row in rows:
            if not row.memory_ids:
                outcomes[await self._finish(person.id, [row], _reply_of(row))] += 1
        return outcomes

    async def _finish(self, user_id: int, rows: Sequence[Held], notice: Reply) -> str:
        outcome = await self._send(user_id, notice)
        await held_notices.close(
            self._sessions,
            [r.id for r in rows],
            status="sent" if outcome == "sent" else "dropped",
            now=self._clock.now(),
            reason=None if outcome == "sent" else "undelivered",
        )
        return outcome


def _pairs(buttons: tuple[tuple[Button, ...], ...]) -> held_notices.ButtonRows:
    return tuple(tuple((b.label, b.action) for b in row) for row in buttons)


def _reply_of(row: Held) -> Reply:
    buttons = tuple(tuple(Button(label, action) for label, action in r) for r in row.buttons)
    return Reply(row.text, buttons, private=True)
