"""Discord messages → core turns: which to answer, bursts answered once, a per-person
rate limit, the typing indicator, and edits of stored messages.

In a server the bot answers only when mentioned or replied to; anything personal is
sent to the person's DM instead of the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import discord
import structlog

from adapters.bursts import BurstCoalescer
from adapters.discord_bot.rendering import has_content, send_to_channel
from adapters.inflight import InFlight
from adapters.ratelimit import RATE_LIMITED, Limiter
from bot.bootstrap import Core
from bot.chat_exports import looks_importable
from bot.domain import Attachment, IncomingMessage, Reply

log = structlog.get_logger(__name__)

PLATFORM = "discord"
NON_TEXT = "I can only read text for now — could you tell me in words?"
MENTION_ME = "I can only read messages here that @mention me — or write to me in a DM."
SENT_PRIVATELY = "That's personal, so I've sent it to you in a DM."
CANNOT_DM = (
    "That's personal, so I won't post it here — but I can't DM you. Allow direct messages "
    "from server members, or use my slash commands here (only you see their answers)."
)
SORRY = "Sorry — something went wrong on my side. Please try again in a moment."
_CONVERSATION_TYPES = (discord.MessageType.default, discord.MessageType.reply)


@dataclass
class _Queue:
    """Keeps one person's messages in arrival order while they are stored."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass(frozen=True, slots=True)
class Turn:
    """A message for the core, with the Discord message to answer."""

    incoming: IncomingMessage
    message: discord.Message


class MessageHandler:
    """The client's `on_message` and `on_raw_message_edit`."""

    def __init__(
        self, *, core: Core, client: discord.Client, inflight: InFlight, limiter: Limiter
    ) -> None:
        self._core = core
        self._client = client
        self._inflight = inflight
        self._limiter = limiter
        self._noticed: set[int] = set()
        self._queues: dict[int, _Queue] = {}
        self._bursts: BurstCoalescer[Turn] = BurstCoalescer(
            store=self._store,
            answer=self._answer,
            window=core.settings.burst_window_seconds,
            shared=core.coordination,
            name=PLATFORM,
        )
        self.closing = False

    async def on_message(self, message: discord.Message) -> None:
        """Answer a DM, or a server message that mentions or replies to the bot."""
        bot = self._client.user
        if bot is None or message.author.bot or message.type not in _CONVERSATION_TYPES:
            return
        if message.guild is not None and not _addressed(message, bot):
            return
        with self._inflight.track():
            await self._route(message, _text_of(message, bot))

    async def _route(self, message: discord.Message, text: str) -> None:
        if _importable(message) and not text.startswith("/"):
            await self._answer(Turn(_incoming(message, text, _attachment(message)), message))
            return
        notice = _unreadable(message, text)
        if notice is not None:
            await self._say(message, Reply(notice))
            return
        turn = Turn(_incoming(message, text), message)
        if not text or text.startswith("/"):
            await self._answer(turn)  # commands (and a bare mention) are never stored as chat
            return
        # In line first: taking a token may wait on the database, and the next message's
        # task must not overtake this one meanwhile.
        async with self._in_order(message.author.id):
            allowed = await self._limiter.take(message.author.id)
            if not allowed:
                await self._store(turn)
            elif not self.closing:
                self._noticed.discard(message.author.id)
                await self._bursts.add((message.author.id, message.channel.id), turn)
                return
        if not allowed:
            await self._notice_rate_limit(message)
            return
        self._noticed.discard(message.author.id)
        await self._answer(turn)  # closing: answered at once, not held for a burst

    @contextlib.asynccontextmanager
    async def _in_order(self, person: int) -> AsyncIterator[None]:
        """One person's messages are stored one at a time, in the order they arrived.

        discord.py runs every event in its own task, so without this a burst could be
        stored out of order and its quiet timer started twice.
        """
        queue = self._queues.setdefault(person, _Queue())
        queue.users += 1
        try:
            async with queue.lock:
                yield
        finally:
            queue.users -= 1
            if queue.users == 0:
                del self._queues[person]

    async def _notice_rate_limit(self, message: discord.Message) -> None:
        """Say so once; the message itself is already stored."""
        log.info("discord.rate_limited", message_id=message.id)
        if message.author.id not in self._noticed:
            self._noticed.add(message.author.id)
            await self._say(message, Reply(RATE_LIMITED))

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        """Keep a stored message in step when the person edits it."""
        message = payload.message
        if message.author.bot or message.edited_at is None:  # e.g. a link preview was added
            return
        text = _text_of(message, self._client.user)
        if not text:
            return
        changed = await self._core.store.edit_message(
            platform=PLATFORM,
            platform_user_id=str(message.author.id),
            chat_id=str(message.channel.id),
            platform_message_id=str(message.id),
            text=text,
            now=self._core.clock.now(),
        )
        log.info("discord.message_edited", message_id=message.id, stored=changed)

    async def flush(self) -> None:
        """Answer waiting bursts now; later messages are answered without waiting."""
        self.closing = True
        await self._bursts.flush()

    async def _store(self, turn: Turn) -> None:
        await self._core.router.record(turn.incoming)

    async def _answer(self, turn: Turn) -> None:
        """One core turn for the last message of a burst; failures are logged, not raised."""
        with self._inflight.track():
            try:
                async with _typing(turn.message.channel):
                    reply = await self._core.router.handle(turn.incoming)
                await self._say(turn.message, reply)
            except Exception:
                log.exception("discord.turn_failed", message_id=turn.message.id)
                await self._apologise(turn.message)

    async def _apologise(self, message: discord.Message) -> None:
        try:
            await self._say(message, Reply(SORRY))
        except Exception:
            log.warning("discord.apology_failed", message_id=message.id, exc_info=True)

    async def _say(self, message: discord.Message, reply: Reply) -> None:
        """Answer in the DM, or in the server (personal replies go to the DM instead)."""
        if not has_content(reply):
            return
        if message.guild is None:
            await send_to_channel(message.channel, reply)
            return
        if not reply.private:
            await send_to_channel(message.channel, reply, reference=message)
            return
        try:
            await send_to_channel(await message.author.create_dm(), reply)
        except discord.Forbidden:
            log.info("discord.dm_refused", message_id=message.id)
            await send_to_channel(message.channel, Reply(CANNOT_DM), reference=message)
            return
        await send_to_channel(message.channel, Reply(SENT_PRIVATELY), reference=message)


def _addressed(message: discord.Message, bot: discord.ClientUser) -> bool:
    """Whether a server message mentions the bot or replies to one of its messages."""
    if any(user.id == bot.id for user in message.mentions):
        return True
    reference = message.reference
    resolved = reference.resolved if reference is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == bot.id


def _unreadable(message: discord.Message, text: str) -> str | None:
    """What to say when there is no text to read; None when there is (or a bare mention)."""
    if text:
        return None
    if message.attachments or message.stickers or message.guild is None:
        return NON_TEXT
    # Without the message content intent a reply that does not ping the bot arrives empty.
    return None if message.content else MENTION_ME


def _text_of(message: discord.Message, bot: discord.ClientUser | None) -> str:
    """The message text without the bot's mention."""
    text = message.content
    if bot is not None:
        text = re.sub(rf"<@!?{bot.id}>", " ", text)
    return text.strip()


def _importable(message: discord.Message) -> bool:
    """A file named like a chat export is for the importer; other files are not read."""
    return bool(message.attachments) and looks_importable(message.attachments[0].filename)


def _attachment(message: discord.Message) -> Attachment:
    """The first file of a message (a chat export to import), fetched only when read."""
    first = message.attachments[0]

    async def fetch(path: Path) -> None:
        await first.save(path)

    return Attachment(first.filename, first.size, fetch)


def _incoming(
    message: discord.Message, text: str, attachment: Attachment | None = None
) -> IncomingMessage:
    return IncomingMessage(
        platform=PLATFORM,
        platform_user_id=str(message.author.id),
        text=text,
        chat_id=str(message.channel.id),
        display_name=message.author.display_name,
        platform_message_id=str(message.id),
        sent_at=message.created_at,
        is_private=message.guild is None,
        attachment=attachment,
    )


@contextlib.asynccontextmanager
async def _typing(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """'Typing…' while the core thinks; a failed indicator never blocks the reply."""
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(channel.typing())
        except discord.HTTPException as exc:
            log.info("discord.typing_failed", status=exc.status)
        yield
