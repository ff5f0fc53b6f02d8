"""The Telegram update handlers: messages, edits, button presses and membership changes go
through the core; replies go back through `TelegramSender`.

Plain text is stored at once (also over the rate limit) and answered once per burst;
commands are answered at once.
In groups the bot answers only when addressed, and anything personal goes to the
person's private chat, never to the group.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from datetime import timedelta

import structlog
from telegram import Message, Update
from telegram.constants import ChatMemberStatus, ChatType
from telegram.error import Forbidden, TelegramError
from telegram.ext import ContextTypes

from adapters.bursts import BurstCoalescer, SharedQuiet
from adapters.inflight import InFlight
from adapters.ratelimit import RATE_LIMITED, Limiter
from adapters.telegram_bot.inbound import PLATFORM, BotIdentity, Inbound, read_edit, read_message
from adapters.telegram_bot.outbound import TelegramSender
from bot.bootstrap import Core
from bot.commands.catalog import COMMANDS
from bot.domain import ButtonPress, IncomingMessage, Reply

log = structlog.get_logger(__name__)

PERSONAL_COMMANDS = frozenset(command.name for command in COMMANDS if command.personal)
UNSUPPORTED = (
    "I can only read text for now, so I can't take in {kind} — could you tell me about it "
    "in a few words?"
)
SENT_PRIVATELY = "I've sent you that in our private chat."
OPEN_PRIVATE_CHAT = (
    "That's personal, so I only share it in a private chat. Please open one with me first — "
    "https://t.me/{username} — press Start, then ask me there."
)
MAX_LIMITED_NOTICES = 10_000
RECOVER_WITHIN = timedelta(hours=24)
"""How old an unanswered message may be and still be answered after a restart (as long
as Telegram keeps an unconfirmed update)."""
DRAIN_SECONDS = 30.0
"""How long a stop waits for turns still being answered."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where an answer goes: the chat, the person, and (in groups) the message answered."""

    chat_id: int
    user_id: int
    private: bool
    reply_to: int | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """A stored message waiting for its burst to end, and where the answer goes."""

    incoming: IncomingMessage
    target: Target


class TelegramHandlers:
    """Callbacks for python-telegram-bot's handlers, over one core."""

    def __init__(
        self,
        core: Core,
        sender: TelegramSender,
        me: BotIdentity,
        *,
        limiter: Limiter,
        burst_window: float,
        shared: SharedQuiet | None = None,
        typing_interval: float = 4.0,
        failures: dict[int, BaseException] | None = None,
    ) -> None:
        self._core = core
        self.failures: dict[int, BaseException] = failures if failures is not None else {}
        self._sender = sender
        self._me = me
        self._limiter = limiter
        self._typing_interval = typing_interval
        self._told_limited: set[int] = set()
        self._inflight = InFlight()
        self._bursts: BurstCoalescer[Turn] = BurstCoalescer(
            store=self._store_turn,
            answer=self._answer_turn,
            window=burst_window,
            shared=shared,
            name=PLATFORM,
        )

    # Handlers

    async def on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A new message: commands at once, text after its burst, anything else a short note."""
        message = update.message
        inbound = read_message(message, self._me) if message is not None else None
        if inbound is None:
            return
        target = Target(
            inbound.chat_id,
            inbound.user_id,
            inbound.private,
            None if inbound.private else inbound.message_id,
        )
        if not await self._within_rate(inbound, target):
            return
        if inbound.unsupported is not None:
            note = Reply(UNSUPPORTED.format(kind=inbound.unsupported))
            await self._deliver(target, note, personal=False)
        elif inbound.incoming.attachment is not None:
            await self._file(inbound, target)
        elif inbound.command is not None:
            await self._command(inbound, target)
        else:
            key = (inbound.user_id, inbound.chat_id)
            await self._bursts.add(key, Turn(inbound.incoming, target))

    async def on_edited(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """An edited message: replace the stored text; no new reply."""
        message = update.edited_message
        edit = read_edit(message, self._me) if message is not None else None
        if edit is None:
            return
        changed = await self._core.store.edit_message(
            platform=PLATFORM,
            platform_user_id=str(edit.user_id),
            chat_id=str(edit.chat_id),
            platform_message_id=str(edit.message_id),
            text=edit.text,
            now=self._core.clock.now(),
        )
        log.info("telegram.message_edited", stored=changed)

    async def on_press(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A button press: always answered, routed to the core, shown in place of the message."""
        query = update.callback_query
        if query is None:
            return
        try:
            await query.answer()
        except TelegramError as exc:
            log.warning("telegram.callback_answer_failed", error=exc.message[:120])
        user, message = query.from_user, query.message
        chat = message.chat if message is not None else None
        private = chat is None or chat.type == ChatType.PRIVATE
        press = ButtonPress(
            platform=PLATFORM,
            platform_user_id=str(user.id),
            action=query.data or "",
            chat_id=str(chat.id) if chat is not None else None,
            display_name=user.full_name or None,
            is_private=private,
            message_id=str(message.message_id) if message is not None else None,
        )
        reply = await self._core.router.press(press)
        target = Target(chat.id if chat is not None else user.id, user.id, private)
        if reply.silent:
            return
        if isinstance(message, Message) and (private or not reply.private):
            await self._guarded(
                target, self._sender.edit(message.chat.id, message.message_id, reply)
            )
        else:
            await self._deliver(target, reply, personal=False)

    async def on_member(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """The person blocked the bot in their private chat (unreachable) or came back."""
        change = update.my_chat_member
        if change is None or change.chat.type != ChatType.PRIVATE:
            return
        status = change.new_chat_member.status
        reachable = status not in {ChatMemberStatus.BANNED, ChatMemberStatus.LEFT}
        await self._core.store.set_reachable(
            platform=PLATFORM, platform_user_id=str(change.from_user.id), reachable=reachable
        )
        log.info("telegram.reachability_changed", reachable=reachable)

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Log an update that failed, with its traceback (never its text), and note it
        for the poller, which then fetches it again instead of confirming it."""
        update_id = update.update_id if isinstance(update, Update) else None
        error = context.error
        if update_id is not None and error is not None:
            self.failures[update_id] = error
        log.error(
            "telegram.update_failed",
            update_id=update_id,
            error=type(error).__name__,
            exc_info=error,
        )

    async def answer_waiting(self, within: timedelta = RECOVER_WITHIN) -> int:
        """Answer the messages stored before a stop or crash but never answered (their
        updates were confirmed, so Telegram will not send them again); how many."""
        since = self._core.clock.now() - within
        waiting = await self._core.store.waiting_turns(platform=PLATFORM, since=since)
        for turn in waiting:
            incoming = IncomingMessage(
                platform=PLATFORM,
                platform_user_id=turn.platform_user_id,
                text=turn.text,
                chat_id=turn.chat_id,
                display_name=turn.display_name,
                platform_message_id=turn.platform_message_id,
            )
            target = Target(int(turn.chat_id), int(turn.platform_user_id), True)
            await self._bursts.add((target.user_id, target.chat_id), Turn(incoming, target))
        if waiting:
            log.info("telegram.answering_waiting", count=len(waiting))
        return len(waiting)

    async def drain(self) -> None:
        """Answer every waiting burst now and wait for answers still being written."""
        await self._bursts.flush()
        await self._inflight.wait(DRAIN_SECONDS)

    # Turns

    async def _command(self, inbound: Inbound, target: Target) -> None:
        assert inbound.command is not None
        with self._inflight.track():
            reply = await self._core.router.handle(inbound.incoming)
            personal = inbound.command.name in PERSONAL_COMMANDS
            await self._deliver(target, reply, personal=personal)

    async def _file(self, inbound: Inbound, target: Target) -> None:
        """A document: read by the core (an export to import), answered at once."""
        with self._inflight.track():
            async with self._typing(target.chat_id):
                reply = await self._core.router.handle(inbound.incoming)
            await self._deliver(target, reply, personal=False)

    async def _store_turn(self, turn: Turn) -> None:
        await self._core.router.record(turn.incoming)

    async def _answer_turn(self, turn: Turn) -> None:
        with self._inflight.track():
            try:
                async with self._typing(turn.target.chat_id):
                    reply = await self._core.router.handle(turn.incoming)
                await self._deliver(turn.target, reply, personal=False)
            except Exception as exc:
                log.error("telegram.turn_failed", error=type(exc).__name__, exc_info=exc)

    @contextlib.asynccontextmanager
    async def _typing(self, chat_id: int) -> AsyncIterator[None]:
        """Show 'typing…' until the block ends, renewed before Telegram hides it."""
        task = asyncio.create_task(self._keep_typing(chat_id))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _keep_typing(self, chat_id: int) -> None:
        while True:
            try:
                await self._sender.typing(chat_id)
            except TelegramError as exc:
                log.debug("telegram.typing_failed", error=type(exc).__name__)
            await asyncio.sleep(self._typing_interval)

    async def _within_rate(self, inbound: Inbound, target: Target) -> bool:
        """Take a token for the person; over the limit, their text is still stored (nothing
        they write is lost) and the first refusal in a row gets a polite note."""
        if await self._limiter.take(target.user_id):
            self._told_limited.discard(target.user_id)
            return True
        log.info("telegram.rate_limited")
        if inbound.command is None and inbound.unsupported is None:
            # Kept like a burst's earlier messages: the person's next answered turn sees it.
            await self._core.router.record(inbound.incoming)
        if target.user_id not in self._told_limited:
            if len(self._told_limited) >= MAX_LIMITED_NOTICES:
                self._told_limited.clear()
            self._told_limited.add(target.user_id)
            await self._deliver(target, Reply(RATE_LIMITED), personal=False)
        return False

    # Delivery

    async def _deliver(self, target: Target, reply: Reply, *, personal: bool) -> None:
        """Send to the chat; personal replies asked for in a group go to the private chat."""
        if reply.silent:
            return
        if target.private or not (personal or reply.private):
            send = self._sender.send(target.chat_id, reply, reply_to=target.reply_to)
            await self._guarded(target, send)
            return
        private = Target(target.user_id, target.user_id, True)
        delivered = await self._guarded(private, self._sender.send(target.user_id, reply))
        notice = (
            SENT_PRIVATELY if delivered else OPEN_PRIVATE_CHAT.format(username=self._me.username)
        )
        await self._sender.send(target.chat_id, Reply(notice), reply_to=target.reply_to)

    async def _guarded(self, target: Target, sending: Awaitable[int | None]) -> bool:
        """Await a send; in a private chat, Forbidden means the person blocked the bot."""
        try:
            await sending
        except Forbidden as exc:
            if not target.private:
                raise
            log.info("telegram.blocked_by_person", error=exc.message[:120])
            await self._core.store.set_reachable(
                platform=PLATFORM, platform_user_id=str(target.user_id), reachable=False
            )
            return False
        return True
