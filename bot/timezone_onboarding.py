"""Asking for the timezone and offering to set it.

On first contact (Telegram /start, or anyone's first private message on any platform)
the reply carries the question, with buttons for the zones the platform hints at and a
city in free text. Someone who does not answer is asked once more, in a reply at least a
day later, then never again. A short reply naming a place ("Lisbon", "in Lisbon,
Portugal") from someone asked and still without a zone is taken as the answer. When a
person mentions where they live or what time it is for them, the reply offers to set the
matching zone (one tap), unless it is the zone they have or the one last offered.

Someone who never writes again is asked the second time on their own, once: the one
message sent before the timezone is known, a day after their last message (the hour
they were active), claimed by the scheduler (memory/store/timezone_asks.py) and sent here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import structlog

from bot.commands.base import ButtonSpec, CommandDeps, make_buttons
from bot.domain import Button, IncomingMessage, Reply
from bot.errors import DeliveryFailed
from bot.outbound import Outbound
from bot.timezone_talk import ZoneMention, answered_place, zone_mention
from bot.zone_guess import likely_zones
from memory.store.records import Person

log = structlog.get_logger(__name__)

QUESTION = (
    "Which timezone are you in? Tap one, or just tell me your city. Until I know, I won't "
    "message you on my own — I'd rather not wake you."
)
ASKED_AGAIN = (
    "Yesterday I asked which timezone you're in — until I know it I won't message you on "
    "my own. Tap one, or tell me your city."
)
ASK_AGAIN_AFTER = timedelta(days=1)
MAX_ASKS = 2


def zone_label(zone: str) -> str:
    """'America/Los_Angeles' → 'Los Angeles'."""
    return zone.rsplit("/", 1)[-1].replace("_", " ")


def due_to_ask(person: Person, now: datetime) -> bool:
    """Whether this reply should ask for the timezone: never yet, or once more at least a
    day after the first time."""
    if person.timezone_known or person.timezone_asks >= MAX_ASKS:
        return False
    if person.timezone_asks == 0 or person.timezone_asked_at is None:
        return True
    return now - person.timezone_asked_at >= ASK_AGAIN_AFTER


class TimezoneOnboarding:
    """Adds the timezone question, or an offer to set a mentioned zone, to a reply."""

    def __init__(self, deps: CommandDeps) -> None:
        self._deps = deps

    async def after_reply(self, person: Person, incoming: IncomingMessage, reply: Reply) -> Reply:
        """`reply`, with the question or an offer added when one is due (private chats
        only); the text is only scanned, no query is made, when there is nothing to add."""
        if not incoming.is_private or reply.silent or reply.buttons:
            return reply
        now = self._deps.clock.now()
        current = person.timezone if person.timezone_known else None
        mention = zone_mention(incoming.text, now, current)
        if mention is None and current is None and person.timezone_asks > 0:
            mention = answered_place(incoming.text)  # a bare city answers the question
        if mention is not None and mention.key != person.timezone_offered:
            return await self._offer(person, mention, reply, now)
        if due_to_ask(person, now):
            text, buttons = await self.question(person, incoming)
            return Reply(f"{reply.text}\n\n{text}", buttons, private=reply.private)
        return reply

    async def question(
        self, person: Person, incoming: IncomingMessage, *, text: str = QUESTION
    ) -> tuple[str, tuple[tuple[Button, ...], ...]]:
        """The question with its buttons, counted as asked."""
        buttons = await self._zone_buttons(
            person, likely_zones(incoming.locale, incoming.local_zone)
        )
        await self._deps.store.update_person(
            person.id,
            timezone_asks=person.timezone_asks + 1,
            timezone_asked_at=self._deps.clock.now(),
        )
        log.info("timezone.asked", asks=person.timezone_asks + 1)
        return text, buttons

    async def ask_again(self, user_id: int, outbound: Outbound) -> str:
        """Send the second question on its own to someone already claimed for it (counted
        as asked by the claim); the outcome: 'sent', 'gone' or 'failed'."""
        person = await self._deps.store.person(user_id)
        if person is None or person.timezone_known:
            return "gone"
        buttons = await self._zone_buttons(person, likely_zones())
        try:
            await outbound.send(person.id, Reply(ASKED_AGAIN, buttons, private=True))
        except DeliveryFailed as exc:
            log.warning("timezone.ask_failed", user_id=person.id, reason=exc.reason)
            return "failed"
        log.info("timezone.asked", asks=2, proactive=True)
        return "sent"

    async def _zone_buttons(
        self, person: Person, zones: Sequence[str]
    ) -> tuple[tuple[Button, ...], ...]:
        specs = [ButtonSpec(zone_label(z), "timezone", {"value": z}) for z in zones]
        rows: list[Sequence[ButtonSpec]] = [specs[i : i + 2] for i in range(0, len(specs), 2)]
        rows.append([ButtonSpec("Other…", "timezone_menu", {})])
        return await make_buttons(self._deps, person, rows)

    async def _offer(
        self, person: Person, mention: ZoneMention, reply: Reply, now: datetime
    ) -> Reply:
        specs = [
            [ButtonSpec(f"Set timezone to {z}", "timezone", {"value": z})] for z in mention.zones
        ]
        buttons = await make_buttons(self._deps, person, specs)
        values: dict[str, object] = {"timezone_offered": mention.key[:64]}
        if not person.timezone_known and person.timezone_asks == 0:
            values |= {"timezone_asks": 1, "timezone_asked_at": now}  # this was the question
        await self._deps.store.update_person(person.id, **values)
        if len(mention.zones) == 1:
            ask = f"Shall I set your timezone to {mention.zones[0]}?"
        else:
            ask = "Is one of these your timezone?"
        log.info("timezone.offered", zones=len(mention.zones))
        text = f"{reply.text}\n\n{ask} (/timezone changes it any time.)"
        return Reply(text, buttons, private=reply.private)
