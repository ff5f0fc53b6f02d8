"""A small world for multi-day scenarios: the whole core on real PostgreSQL, a clock the
scenario moves, the scheduler's real jobs run at every moment something can fall due,
people who write and press buttons, and a record of everything the companion sent and
everything the model was shown.

Only the user-facing surface is driven: messages and commands through the core's
`Router`, button presses with the actions of the buttons that were sent, proactive
messages through delivery ports registered on the core's `Outbound`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import text

from bot.bootstrap import Core
from bot.domain import Button, ButtonPress, IncomingMessage, Recipient, Reply
from memory.person_words import element
from scheduler.checkins import minute_tick
from scheduler.deps import SchedulerDeps
from scheduler.patrol import run_nightly
from tests.conftest import FakeClock
from tests.scenarios.model import Prompt, ScenarioModel

GRID = timedelta(hours=1)  # besides every due moment, the jobs run at least this often
SETTLE = timedelta(seconds=30)  # how long after a due time the jobs run
NIGHT_START, NIGHT_END = time(22, 0), time(8, 0)  # the default quiet hours

_DUE = text("""
SELECT t FROM (
    SELECT next_checkin_at AS t FROM users
    UNION ALL SELECT next_patrol_at FROM users
    UNION ALL SELECT due_at FROM outreach WHERE status = 'pending'
    UNION ALL SELECT event_at + CAST(:followup AS interval) FROM memories
        WHERE event_at IS NOT NULL AND status = 'active'
    UNION ALL SELECT last_message_at + CAST(:idle AS interval) FROM sessions
        WHERE closed_at IS NULL
) AS due WHERE t > :now AND t <= :end
""")
_QUIET = text("SELECT timezone, quiet_start, quiet_end FROM users")
_PATROL_DUE = text("""
SELECT EXISTS (SELECT 1 FROM users WHERE next_patrol_at IS NULL OR next_patrol_at <= :now)
""")
_USER_ID = text("""
SELECT user_id FROM identities WHERE platform = :platform AND platform_user_id = :name
""")


@dataclass(frozen=True, slots=True)
class Sent:
    """One message the companion sent: a reply, or a message on its own initiative."""

    index: int
    at: datetime
    to: str  # the person's name
    chat_id: str
    reply: Reply
    proactive: bool

    @property
    def text(self) -> str:
        """The message text."""
        return self.reply.text

    @property
    def labels(self) -> list[str]:
        """Every button label under it, row by row."""
        return [b.label for row in self.reply.buttons for b in row]


@dataclass(frozen=True, slots=True)
class Mark:
    """A point in the scenario: how many prompts and messages there were, and when."""

    prompts: int
    sent: int
    at: datetime


class RecordingPort:
    """A delivery port of one platform that records each message in the world."""

    def __init__(self, world: World, platform: str) -> None:
        self.platform = platform
        self._world = world

    async def send(self, recipient: Recipient, reply: Reply) -> str:
        """Record the message as sent to the person behind `recipient`."""
        sent = self._world.record(recipient.platform_user_id, recipient.chat_id, reply, True)
        return str(sent.index)


@dataclass
class Person:
    """Someone who talks to the companion on one platform, living in `zone`."""

    world: World
    name: str
    platform: str
    zone: str
    display_name: str

    @property
    def chat_id(self) -> str:
        """Their private chat with the companion."""
        return f"dm-{self.name}"

    @property
    def tz(self) -> ZoneInfo:
        """Their real timezone (what the companion should learn)."""
        return ZoneInfo(self.zone)

    def local(self, at: datetime) -> datetime:
        """`at` on their wall clock."""
        return at.astimezone(self.tz)

    def at(self, day: date, hhmm: str) -> datetime:
        """The UTC instant of `hhmm` on `day` on their wall clock."""
        hours, minutes = (int(p) for p in hhmm.split(":"))
        return datetime.combine(day, time(hours, minutes), self.tz).astimezone(UTC)

    def today(self) -> date:
        """Their local date now."""
        return self.local(self.world.clock.now()).date()

    async def says(self, words: str, *, group: str | None = None) -> Reply:
        """They write `words` in their private chat (or in the group chat `group`)."""
        chat = group or self.chat_id
        reply = await self.world.core.router.handle(
            IncomingMessage(
                self.platform,
                self.name,
                words,
                chat_id=chat,
                display_name=self.display_name,
                is_private=group is None,
            )
        )
        await self.world.core.background.drain()
        self.world.record(self.name, self._shown_in(chat, reply), reply, False)
        return reply

    def _shown_in(self, chat: str, reply: Reply) -> str:
        """Where the adapters show a reply: a private one never in a group (it goes to
        the person's private chat, or is ephemeral)."""
        return self.chat_id if reply.private else chat

    async def press(self, reply: Reply | Sent, label: str, *, group: str | None = None) -> Reply:
        """They press the first button under `reply` whose label contains `label`."""
        action = find_button(reply, label).action
        chat = group or self.chat_id
        answer = await self.world.core.router.press(
            ButtonPress(
                self.platform,
                self.name,
                action,
                chat_id=chat,
                display_name=self.display_name,
                is_private=group is None,
            )
        )
        await self.world.core.background.drain()
        self.world.record(self.name, self._shown_in(chat, answer), answer, False)
        return answer

    async def user_id(self) -> int:
        """Their id in the database (for reading state the scenario asserts on)."""
        async with self.world.core.sessions() as db:
            found = await db.scalar(_USER_ID, {"platform": self.platform, "name": self.name})
        assert found is not None, f"{self.name} has never written"
        return int(found)


def buttons_of(reply: Reply | Sent) -> list[Button]:
    """Every button under a reply or a sent message."""
    message = reply.reply if isinstance(reply, Sent) else reply
    return [b for row in message.buttons for b in row]


def find_button(reply: Reply | Sent, label: str) -> Button:
    """The first button whose label contains `label` (case-insensitive)."""
    found = [b for b in buttons_of(reply) if label.lower() in b.label.lower()]
    shown = [b.label for b in buttons_of(reply)]
    assert found, f"no button {label!r} among {shown} under {_text_of(reply)[:200]!r}"
    return found[0]


def _text_of(reply: Reply | Sent) -> str:
    return reply.text


@dataclass
class World:
    """The core, its clock and model, the scheduler's jobs, and what was sent."""

    core: Core
    clock: FakeClock
    model: ScenarioModel
    deps: SchedulerDeps
    people: dict[str, Person] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    grid: timedelta = GRID

    def register_platforms(self, platforms: Iterable[str]) -> None:
        """A recording delivery port for each platform."""
        for platform in platforms:
            self.core.outbound.register(RecordingPort(self, platform))

    def person(self, name: str, platform: str, zone: str, display_name: str) -> Person:
        """Someone in the scenario (they exist for the companion once they write)."""
        self.people[name] = Person(self, name, platform, zone, display_name)
        return self.people[name]

    def record(self, to: str, chat_id: str, reply: Reply, proactive: bool) -> Sent:
        """Keep one sent message (silent replies send nothing and are not kept)."""
        sent = Sent(len(self.sent), self.clock.now(), to, chat_id, reply, proactive)
        if not (reply.silent and not reply.text and not reply.buttons):
            self.sent.append(sent)
        return sent

    # time -------------------------------------------------------------------------

    async def run_jobs(self) -> None:
        """Everything the scheduler would run at this moment: the session sweep (closing
        idle sessions and extracting them), the minute tick (outbox recovery, check-ins,
        follow-ups), the nightly patrol and diary; then background work settles."""
        await self.deps.memory.sweep(idle_gap=self.deps.config.idle_gap)
        await self.core.background.drain()
        await minute_tick(self.deps)
        async with self.core.sessions() as db:  # the nightly job does nothing otherwise
            patrol_due = await db.scalar(_PATROL_DUE, {"now": self.clock.now()})
        if patrol_due:
            await run_nightly(self.deps)
        await self.core.background.drain()

    async def advance(self, **delta: float) -> None:
        """Move the clock forward by `delta`, running the jobs at every due moment."""
        await self.advance_to(self.clock.now() + timedelta(**delta))

    async def advance_to(self, end: datetime) -> None:
        """Move the clock to `end`, running the jobs whenever something can fall due (a
        check-in, a patrol, an outbox row, a follow-up, an idle session, the end of
        someone's quiet hours) and at least every `grid`, and at `end`."""
        assert end >= self.clock.now(), "time only moves forward"
        while True:
            now = self.clock.now()
            steps = [t + SETTLE for t in await self._due_times(now, end)]
            steps += [now + self.grid, end]
            self.clock.current = min(t for t in steps if t > now) if end > now else end
            self.clock.current = min(self.clock.current, end)
            await self.run_jobs()
            if self.clock.now() >= end:
                return

    async def _due_times(self, now: datetime, end: datetime) -> list[datetime]:
        params = {
            "now": now,
            "end": end,
            "followup": self.deps.config.followup_delay,
            "idle": self.deps.config.idle_gap,
        }
        async with self.core.sessions() as db:
            due = [row[0] for row in await db.execute(_DUE, params)]
            quiet = (await db.execute(_QUIET)).all()
        for timezone, start, stop in quiet:
            for boundary in (start, stop):
                due += _local_times(now, end, timezone, boundary)
        return due

    async def next_day(self, person: Person, hhmm: str) -> None:
        """Advance to `hhmm` on the person's next local day."""
        await self.advance_to(person.at(person.today() + timedelta(days=1), hhmm))

    async def until_local(self, person: Person, hhmm: str) -> None:
        """Advance to the next `hhmm` on the person's wall clock (today or tomorrow)."""
        target = person.at(person.today(), hhmm)
        if target <= self.clock.now():
            target = person.at(person.today() + timedelta(days=1), hhmm)
        await self.advance_to(target)

    # what happened ----------------------------------------------------------------

    def mark(self) -> Mark:
        """Now, for `prompts_since` and `sent_to(since=...)`."""
        return Mark(len(self.model.prompts), len(self.sent), self.clock.now())

    def prompts_since(
        self, mark: Mark | None = None, *, person: Person | None = None
    ) -> list[Prompt]:
        """Every request the model got since `mark` (only those naming `person`)."""
        prompts = self.model.prompts[mark.prompts if mark else 0 :]
        if person is not None:
            prompts = [p for p in prompts if _names(p, person)]
        return prompts

    def chat_prompts(self, person: Person, mark: Mark | None = None) -> list[Prompt]:
        """The conversation turns (replies to the person) since `mark`."""
        return [p for p in self.prompts_since(mark, person=person) if p.is_chat_turn]

    def last_chat_prompt(self, person: Person) -> Prompt:
        """The prompt of the companion's latest reply to the person."""
        prompts = self.chat_prompts(person)
        assert prompts, f"the model was never asked to answer {person.name}"
        return prompts[-1]

    def sent_to(
        self, person: Person, mark: Mark | None = None, *, proactive: bool | None = None
    ) -> list[Sent]:
        """What was sent to the person since `mark` (only proactive or only replies)."""
        found = [s for s in self.sent[mark.sent if mark else 0 :] if s.to == person.name]
        if proactive is not None:
            found = [s for s in found if s.proactive is proactive]
        return found

    def sent_to_chat(self, chat_id: str, mark: Mark | None = None) -> list[Sent]:
        """Everything sent into one chat since `mark`."""
        return [s for s in self.sent[mark.sent if mark else 0 :] if s.chat_id == chat_id]

    def transcript(self, person: Person, mark: Mark | None = None) -> str:
        """What was sent to the person, one line each with local time (for messages)."""
        return "\n".join(
            f"{person.local(s.at):%a %d %b %H:%M} {'→' if s.proactive else '↩'} "
            f"{s.text[:160]!r} {s.labels}"
            for s in self.sent_to(person, mark)
        )


def _local_times(
    now: datetime, end: datetime, timezone: str | None, at: time | None
) -> list[datetime]:
    """Every instant in (now, end] when it is `at` on the wall clock of `timezone`."""
    if timezone is None or at is None:
        return []
    zone = ZoneInfo(timezone)
    day = now.astimezone(zone).date()
    found = []
    while (moment := datetime.combine(day, at, zone).astimezone(UTC)) <= end:
        if moment > now:
            found.append(moment)
        day += timedelta(days=1)
    return found


def _names(prompt: Prompt, person: Person) -> bool:
    name = element("name", person.display_name)
    return f"The person's display name (data): {name}" in prompt.text


# assertions -------------------------------------------------------------------------


def assert_in_prompt(prompt: Prompt, *words: str) -> None:
    """Each of `words` is somewhere in what the model was shown."""
    shown = prompt.text
    for word in words:
        assert word in shown, f"{word!r} is not in the prompt:\n{shown}"


def assert_not_in_prompt(prompt: Prompt, *words: str) -> None:
    """None of `words` (case-insensitive) is in what the model was shown."""
    shown = prompt.text.lower()
    for word in words:
        assert word.lower() not in shown, f"{word!r} is in the prompt:\n{prompt.text}"


def assert_not_in_any_prompt(prompts: Sequence[Prompt], *words: str) -> None:
    """None of `words` (case-insensitive) reached the model in any of `prompts`."""
    for prompt in prompts:
        shown = prompt.text.lower()
        for word in words:
            assert word.lower() not in shown, (
                f"{word!r} reached the model at {prompt.at:%a %d %b %H:%M} UTC "
                f"({prompt.tool or 'conversation turn'}):\n{prompt.text}"
            )


def assert_in_order(shown: str, *parts: str) -> None:
    """`parts` appear in `shown`, each after the one before."""
    position = 0
    for part in parts:
        found = shown.find(part, position)
        assert found >= 0, f"{part!r} not found (in order) after position {position} in:\n{shown}"
        position = found + len(part)


def assert_nothing_sent_between(
    world: World, person: Person, start: datetime, end: datetime, *, proactive_only: bool = True
) -> None:
    """No message (on the companion's own initiative, by default) went to the person in
    [start, end)."""
    found = [
        s
        for s in world.sent_to(person, proactive=True if proactive_only else None)
        if start <= s.at < end
    ]
    assert not found, f"sent to {person.name} between {start} and {end}: " + "; ".join(
        f"{person.local(s.at):%a %d %b %H:%M} {s.text[:120]!r}" for s in found
    )


def assert_quiet_nights(world: World, person: Person, mark: Mark | None = None) -> None:
    """Nothing went to the person on the companion's own initiative between 22:00 and
    08:00 on their wall clock."""
    night = [
        s
        for s in world.sent_to(person, mark, proactive=True)
        if not NIGHT_END <= person.local(s.at).time() < NIGHT_START
    ]
    assert not night, f"sent to {person.name} at night:\n" + "\n".join(
        f"{person.local(s.at):%a %d %b %H:%M} {s.text[:120]!r}" for s in night
    )


def lines_of(block: str) -> list[str]:
    """The lines of a memory block, stripped."""
    return [line.strip() for line in block.splitlines() if line.strip()]


def memory_labels(listing: str, content: str) -> list[str]:
    """The labels (m12) of the `/memory` lines that show `content`."""
    return [
        m.group(1)
        for line in listing.splitlines()
        if content in line and (m := re.match(r"\s*(m\d+)\b", line)) is not None
    ]
