"""Webhook mode that answers Telegram only once an update has been handled.

Telegram delivers an update to the webhook again, later, until a request for it is
answered with 200. python-telegram-bot's own webhook server answers as soon as it has
queued an update, so an update in flight when the process dies would be lost. This
server hands each update to the application, waits until its handlers ran (a text
message is stored by then) and only then answers 200; when handling failed because the
database was unreachable (or, a few times, for another reason) it answers 500 and
Telegram brings the update back. The core ignores an update it already stored, so a
redelivery after a lost answer is not handled twice.

A request without the secret token is refused (403); while stopping, new requests are
refused (503, Telegram delivers them to the next process) and those in flight finish.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

import structlog
from aiohttp import web
from telegram import Update
from telegram.ext import Application

from adapters.telegram_bot.polling import Failures, retry_update

log = structlog.get_logger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class ConfirmingWebhook:
    """An aiohttp server for Telegram's webhook calls at `path` on `listen`:`port`.

    `failures` is filled by the application's error handler (update id → error).
    """

    def __init__(
        self,
        application: Application[Any, Any, Any, Any, Any, Any],
        *,
        failures: Failures,
        path: str,
        listen: str,
        port: int,
        secret: str,
    ) -> None:
        self._app = application
        self._failures = failures
        self._path = path
        self._listen = listen
        self._port = port
        self._secret = secret.encode()
        self._attempts: dict[int, int] = {}
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False
        self._runner: web.AppRunner | None = None

    async def start(self, *, url: str, allowed_updates: tuple[str, ...]) -> None:
        """Listen, then tell Telegram where to deliver (pending updates are kept)."""
        server = web.Application(client_max_size=1024 * 1024)
        server.router.add_post(self._path, self._receive)
        self._runner = web.AppRunner(server, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._listen, self._port).start()
        await self._app.bot.set_webhook(
            url=url,
            secret_token=self._secret.decode(),
            allowed_updates=list(allowed_updates),
            drop_pending_updates=False,
        )

    async def stop(self) -> None:
        """Refuse new deliveries, let those being handled finish, close the server."""
        self._stopping = True
        await self._idle.wait()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning("telegram.webhook_forbidden")
            return web.Response(status=403)
        if self._stopping:
            return web.Response(status=503)
        self._in_flight += 1
        self._idle.clear()
        try:
            update = await self._read(request)
            if update is None:
                log.warning("telegram.webhook_malformed")
                return web.Response(status=400)
            return await self._handle(update)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def _read(self, request: web.Request) -> Update | None:
        """The update in the request's body; None when it is not one."""
        try:
            body = await request.json()
            if not isinstance(body, dict) or not isinstance(body.get("update_id"), int):
                return None
            return Update.de_json(body, self._app.bot)
        except Exception:  # whatever a forged body makes the parsers raise
            return None

    async def _handle(self, update: Update) -> web.Response:
        """Handle the update; 200 once it went through (or was given up), else 500."""
        processor = self._app.update_processor
        await processor.process_update(update, self._app.process_update(update))
        error = self._failures.pop(update.update_id, None)
        if error is not None and retry_update(self._attempts, update.update_id, error):
            return web.Response(status=500)
        self._attempts.pop(update.update_id, None)
        return web.Response(status=200)
