"""The Telegram adapter: python-telegram-bot's `Application`, driven by its manual
lifecycle inside our event loop, receiving updates by long polling or a webhook.

Restart safety: Telegram drops an update only when a later getUpdates confirms it, and
our poller (`polling.ConfirmingPoller`) confirms an update only after its handlers ran
(a message is stored by then). On stop, polling ends and confirms what was handled,
waiting bursts are answered and turns in flight finish, so nothing is lost or handled
twice; after a crash or a database outage, unconfirmed updates come again and the core
ignores the ones it already stored. The webhook (`webhook.ConfirmingWebhook`) answers
Telegram only once an update was handled, with the same effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import structlog
from telegram import BotCommand, Update
from telegram.error import InvalidToken, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    ChatMemberHandler,
    ExtBot,
    MessageHandler,
    filters,
)

from adapters.ratelimit import Limiter, limiter_for
from adapters.telegram_bot.delivery import TelegramDelivery
from adapters.telegram_bot.flood import OVERALL_PER_SECOND, FloodControl, SendSlots, SharedPace
from adapters.telegram_bot.handlers import TelegramHandlers
from adapters.telegram_bot.inbound import PLATFORM, BotIdentity
from adapters.telegram_bot.outbound import TelegramSender
from adapters.telegram_bot.polling import ConfirmingPoller
from adapters.telegram_bot.processing import PerPersonUpdateProcessor
from adapters.telegram_bot.webhook import ConfirmingWebhook
from bot.bootstrap import Core
from bot.commands.catalog import COMMANDS
from bot.config import Settings
from bot.errors import ConfigurationError

log = structlog.get_logger(__name__)

TelegramApplication = Application[Any, Any, Any, Any, Any, Any]
ALLOWED_UPDATES = (
    Update.MESSAGE,
    Update.EDITED_MESSAGE,
    Update.CALLBACK_QUERY,
    Update.MY_CHAT_MEMBER,
)
POLL_TIMEOUT_SECONDS = 30
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")


def _opt_into_timedelta_periods() -> None:
    # PTB 22 warns on every int time period it reads (RetryAfter.retry_after among them)
    # unless this documented opt-in is set; with it, they are timedeltas.
    os.environ.setdefault("PTB_TIMEDELTA", "true")


def _token(settings: Settings) -> str:
    if settings.telegram_bot_token is None or not settings.telegram_bot_token.get_secret_value():
        raise ConfigurationError("TELEGRAM_BOT_TOKEN is not set (get one from @BotFather)")
    return settings.telegram_bot_token.get_secret_value()


def flood_control(token: str, slots: SendSlots | None) -> FloodControl:
    """Flood control whose overall pace is the bot's across every process on the
    database (`slots`), keyed by the bot's id (the token's public part); without a
    database, this process's own."""
    if slots is None:
        return FloodControl()
    key = f"{PLATFORM}:{token.split(':', 1)[0]}"
    return FloodControl(overall=SharedPace(slots, key, OVERALL_PER_SECOND))


def build_application(settings: Settings, slots: SendSlots | None = None) -> TelegramApplication:
    """The `Application`: our Bot API root, flood control (its pace shared through
    `slots`), per-person update order."""
    _opt_into_timedelta_periods()
    root = settings.telegram_api_base_url.rstrip("/")
    token = _token(settings)
    return (
        ApplicationBuilder()
        .token(token)
        .base_url(f"{root}/bot")
        .base_file_url(f"{root}/file/bot")
        .rate_limiter(flood_control(token, slots))
        .concurrent_updates(PerPersonUpdateProcessor())
        .job_queue(None)
        .updater(None)  # we receive updates ourselves: polling.py and webhook.py
        .build()
    )


def build_bot(settings: Settings, slots: SendSlots | None = None) -> ExtBot[int]:
    """A bare bot for processes that only send (e.g. the scheduler alone)."""
    _opt_into_timedelta_periods()
    root = settings.telegram_api_base_url.rstrip("/")
    token = _token(settings)
    return ExtBot(
        token,
        base_url=f"{root}/bot",
        base_file_url=f"{root}/file/bot",
        rate_limiter=flood_control(token, slots),
    )


@contextlib.asynccontextmanager
async def open_telegram_delivery(
    core: Core, settings: Settings | None = None
) -> AsyncIterator[TelegramDelivery]:
    """A `TelegramDelivery` on its own bot, for a process that runs no adapter."""
    settings = settings or core.settings
    bot = build_bot(settings, core.coordination)
    try:
        await bot.initialize()
    except TelegramError as exc:
        await bot.shutdown()
        raise _startup_error(exc, settings) from None
    try:
        yield TelegramDelivery(bot, core.store)
    finally:
        await bot.shutdown()


class TelegramAdapter:
    """Runs the bot: every update through the core; `stop` loses nothing in flight."""

    def __init__(
        self,
        core: Core,
        settings: Settings | None = None,
        *,
        rate_limiter: Limiter | None = None,
        typing_interval: float = 4.0,
    ) -> None:
        self._core = core
        self._settings = settings or core.settings
        self._application = build_application(self._settings, core.coordination)
        self._limiter = rate_limiter or limiter_for(core, PLATFORM)
        self._typing_interval = typing_interval
        self._handlers: TelegramHandlers | None = None
        self._polling: asyncio.Task[None] | None = None
        self._webhook: ConfirmingWebhook | None = None
        self._stop_polling = asyncio.Event()
        self.delivery = TelegramDelivery(self._application.bot, core.store)

    @property
    def application(self) -> TelegramApplication:
        """The python-telegram-bot application (for wiring and tests)."""
        return self._application

    async def start(self) -> None:
        """Connect, register handlers and the command menu, poll or serve the webhook, and
        offer `delivery` to the core's outbound messages."""
        app = self._application
        webhook = _webhook(self._settings) if self._settings.telegram_mode == "webhook" else None
        try:
            await app.initialize()
        except TelegramError as exc:
            await app.bot.shutdown()
            raise _startup_error(exc, self._settings) from None
        try:
            me = BotIdentity(app.bot.id, app.bot.username)
            self._handlers = TelegramHandlers(
                self._core,
                TelegramSender(app.bot),
                me,
                limiter=self._limiter,
                burst_window=self._settings.burst_window_seconds,
                shared=self._core.coordination,
                typing_interval=self._typing_interval,
            )
            self._register(self._handlers)
            await self._set_commands()
            await app.start()
            await self._receive(webhook)
        except BaseException:
            await self.stop()
            raise
        self._core.outbound.register(self.delivery)
        self._core.health.set("telegram", True, "connected")
        try:
            await self._handlers.answer_waiting()
        except Exception as exc:  # they stay stored and are answered on the next turn
            log.warning("telegram.waiting_not_answered", error=type(exc).__name__)
        log.info("telegram.started", mode=self._settings.telegram_mode, bot_id=app.bot.id)

    async def stop(self, release: asyncio.Event | None = None) -> None:
        """Stop receiving and finish fetched updates and waiting bursts; then, once
        `release` is set (the scheduler's running jobs may still send through this bot),
        disconnect."""
        app = self._application
        if self._polling is not None:
            self._stop_polling.set()
            with contextlib.suppress(Exception):
                await self._polling
            self._polling = None
        if self._webhook is not None:
            await self._webhook.stop()
            self._webhook = None
        if app.running:
            await app.stop()
        log.info("telegram.receiving_stopped")
        if self._handlers is not None:
            await self._handlers.drain()
        if release is not None:
            await release.wait()
        self._core.outbound.unregister(self.delivery.platform)
        self._core.health.set("telegram", False, "disconnected")
        await app.shutdown()
        log.info("telegram.stopped")

    async def run(self, stop: asyncio.Event, release: asyncio.Event | None = None) -> None:
        """Start, run until `stop` is set, then stop cleanly: updates that arrive from then
        on stay with Telegram for the next start, while check-ins already being written
        are still delivered until `release` is set."""
        await self.start()
        try:
            stopping = asyncio.ensure_future(stop.wait())
            watched: set[asyncio.Future[Any]] = {stopping}
            if self._polling is not None:
                watched.add(self._polling)
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if self._polling is not None and self._polling.done():
                self._polling.result()  # polling ended on its own: raise why
        finally:
            await self.stop(release if stop.is_set() else None)

    def _register(self, handlers: TelegramHandlers) -> None:
        app = self._application
        incoming = filters.UpdateType.MESSAGE & ~filters.StatusUpdate.ALL
        app.add_handler(MessageHandler(incoming, handlers.on_message))
        app.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE, handlers.on_edited))
        app.add_handler(CallbackQueryHandler(handlers.on_press))
        app.add_handler(ChatMemberHandler(handlers.on_member, ChatMemberHandler.MY_CHAT_MEMBER))
        app.add_error_handler(handlers.on_error)

    async def _set_commands(self) -> None:
        """The command menu: the catalog's commands this core answers."""
        known = set(self._core.router.command_names)
        commands = [BotCommand(c.name, c.description) for c in COMMANDS if c.name in known]
        try:
            await self._application.bot.set_my_commands(commands)
        except TelegramError as exc:
            log.warning("telegram.commands_not_set", error=exc.message[:120])

    async def _receive(self, webhook: tuple[str, str] | None) -> None:
        """Long-poll getUpdates, or serve the webhook (and register it with Telegram)."""
        if webhook is None:
            assert self._handlers is not None
            poller = ConfirmingPoller(
                self._application,
                failures=self._handlers.failures,
                allowed_updates=ALLOWED_UPDATES,
                poll_timeout=POLL_TIMEOUT_SECONDS,
                on_state=lambda ok, detail: self._core.health.set("telegram", ok, detail),
            )
            await self._application.bot.delete_webhook(drop_pending_updates=False)
            self._stop_polling.clear()
            self._polling = asyncio.create_task(poller.run(self._stop_polling))
            return
        assert self._handlers is not None
        url, secret = webhook
        self._webhook = ConfirmingWebhook(
            self._application,
            failures=self._handlers.failures,
            path=urlsplit(url).path or "/",
            listen=self._settings.telegram_webhook_listen,
            port=self._settings.telegram_webhook_port,
            secret=secret,
        )
        await self._webhook.start(url=url, allowed_updates=ALLOWED_UPDATES)


def _webhook(settings: Settings) -> tuple[str, str]:
    """The webhook's public URL and secret token, both required."""
    url = settings.telegram_webhook_url
    if not url:
        raise ConfigurationError("COMPANION_TELEGRAM_WEBHOOK_URL is required in webhook mode")
    secret = settings.telegram_webhook_secret
    if secret is None or not _SECRET.fullmatch(secret.get_secret_value()):
        raise ConfigurationError(
            "COMPANION_TELEGRAM_WEBHOOK_SECRET is required in webhook mode: 1-256 characters "
            "of A-Z, a-z, 0-9, _ and -"
        )
    return url, secret.get_secret_value()


def _startup_error(exc: TelegramError, settings: Settings) -> ConfigurationError:
    """A clear error for a failed getMe. PTB's own message holds the token: never chain it."""
    if isinstance(exc, InvalidToken):
        return ConfigurationError("TELEGRAM_BOT_TOKEN was rejected by Telegram")
    return ConfigurationError(
        f"could not reach the Telegram Bot API at {settings.telegram_api_base_url} "
        f"({type(exc).__name__}); check TELEGRAM_API_BASE_URL and the network"
    )


async def run_telegram(
    core: Core, stop: asyncio.Event, release: asyncio.Event | None = None
) -> None:
    """Run the Telegram adapter until `stop` is set, delivering until `release` is (the
    CLI's entry point)."""
    await TelegramAdapter(core).run(stop, release)
