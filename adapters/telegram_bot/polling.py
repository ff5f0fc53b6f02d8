"""Long polling that confirms an update only after it was handled.

Telegram keeps an update until a getUpdates call with a higher offset confirms it.
python-telegram-bot's own updater confirms a batch as soon as it has queued it, so a
crash, or a database outage while the batch is handled, would lose those messages. This
poller hands each batch to the application (concurrently across people, in order for
each person), waits until every update's handlers have run (a text message is stored by
then), and moves the offset only past the updates that went through. An update whose
handling failed because the database was unreachable is fetched again and retried until
it goes through; one that fails for another reason is retried a few times, then dropped
with an error log, so one poisoned update cannot stop the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import structlog
from telegram import Update
from telegram.error import InvalidToken, RetryAfter, TelegramError, TimedOut
from telegram.ext import Application

from bot.errors import ConfigurationError
from memory.store.database import is_outage

log = structlog.get_logger(__name__)

MAX_ATTEMPTS = 3
"""Tries of an update that fails for a reason other than an unreachable database."""
READ_MARGIN_SECONDS = 5.0
"""How much longer than the long poll's own timeout its answer may take to arrive."""
BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)

Failures = dict[int, BaseException]
_KIND = re.compile(r"[a-z_]{1,40}")  # an update's kinds are API names ("message", ...)


def retry_update(attempts: dict[int, int], update_id: int, error: BaseException) -> bool:
    """Whether an update whose handling failed with `error` should be tried again (its
    tries counted in `attempts`): always after an outage, a few times otherwise."""
    tries = attempts[update_id] = attempts.get(update_id, 0) + 1
    if is_outage(error):
        log.warning("telegram.update_deferred", update_id=update_id, attempts=tries)
        return True
    if tries < MAX_ATTEMPTS:
        log.warning("telegram.update_retried", update_id=update_id, attempts=tries)
        return True
    log.error("telegram.update_dropped", update_id=update_id, attempts=tries)
    return False


class ConfirmingPoller:
    """Fetches updates with getUpdates and confirms each only once it has been handled.

    `failures` is filled by the application's error handler (update id → error) while
    a batch is handled; `on_state` reports whether polling works (for /healthz).
    """

    def __init__(
        self,
        application: Application[Any, Any, Any, Any, Any, Any],
        *,
        failures: Failures,
        allowed_updates: tuple[str, ...],
        poll_timeout: int,
        on_state: Callable[[bool, str], None] = lambda ok, detail: None,
    ) -> None:
        self._app = application
        self._failures = failures
        self._allowed = list(allowed_updates)
        self._timeout = poll_timeout
        self._on_state = on_state
        self._offset: int | None = None
        self._attempts: dict[int, int] = {}
        self._done: set[int] = set()  # handled, but behind a failed one: not yet confirmed
        self._errors_in_a_row = 0
        self._unreadable: set[int] = set()  # fetched, but not an update PTB can read

    async def run(self, stop: asyncio.Event) -> None:
        """Poll and handle until `stop` is set; then confirm what was handled."""
        while not stop.is_set():
            updates = await self._fetch(stop)
            if updates or self._unreadable:
                await self._handle(updates)
                if self._attempts:
                    await self._pause(stop)
        await self._confirm()

    async def _fetch(self, stop: asyncio.Event) -> tuple[Update, ...]:
        polling = asyncio.ensure_future(self._get_updates())
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({polling, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if not polling.done():
            polling.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await polling
            return ()
        try:
            updates: tuple[Update, ...] = polling.result()
        except InvalidToken as exc:
            raise ConfigurationError("TELEGRAM_BOT_TOKEN was rejected by Telegram") from exc
        except RetryAfter as exc:
            wait = _seconds(exc.retry_after)
            log.warning("telegram.poll_flood_control", retry_after=wait)
            await _sleep_unless(stop, wait)
            return ()
        except TimedOut:
            return ()  # a long poll that outlived the read timeout: simply poll again
        except TelegramError as exc:  # 5xx, a dropped connection, another poller (409)
            self._errors_in_a_row += 1
            delay = BACKOFF_SECONDS[min(self._errors_in_a_row, len(BACKOFF_SECONDS)) - 1]
            self._on_state(False, f"polling failed: {exc.message[:80]}")
            log.warning("telegram.poll_failed", error=exc.message[:120], retry_in=delay)
            await _sleep_unless(stop, delay)
            return ()
        if self._errors_in_a_row:
            self._on_state(True, "connected")
            self._errors_in_a_row = 0
        return updates

    async def _get_updates(self) -> tuple[Update, ...]:
        """One getUpdates call, its updates parsed one by one.

        python-telegram-bot's `get_updates` parses the batch as a whole: one update it
        cannot read fails the batch (the same one comes back on every poll) and is logged
        raw, people's messages included. So the raw batch is fetched with the request
        `get_updates` itself makes (`Bot._post`), and an unreadable update is dropped with
        its id and top-level keys, its neighbours handled as usual.
        """
        bot = self._app.bot
        raw = await bot._post(
            "getUpdates",
            {"offset": self._offset, "timeout": self._timeout, "allowed_updates": self._allowed},
            read_timeout=self._timeout + READ_MARGIN_SECONDS,
        )
        updates: list[Update] = []
        for item in raw if isinstance(raw, list) else ():
            update_id = item.get("update_id") if isinstance(item, dict) else None
            try:
                updates.append(Update.de_json(item, bot))
            except Exception as exc:  # whatever a payload of unknown shape makes PTB raise
                if not isinstance(update_id, int):
                    log.error("telegram.update_unreadable", error=type(exc).__name__)
                    continue
                log.error(
                    "telegram.update_unreadable",
                    update_id=update_id,
                    kinds=sorted(k for k in item if k != "update_id" and _KIND.fullmatch(k))[:5],
                    error=type(exc).__name__,
                )
                self._unreadable.add(update_id)
        return tuple(updates)

    async def _handle(self, updates: tuple[Update, ...]) -> None:
        """Handle the fresh updates of a batch; move the offset past what went through
        (and past the unreadable ones, which are dropped)."""
        fresh = [u for u in updates if u.update_id not in self._done]
        self._failures.clear()
        processor = self._app.update_processor
        await asyncio.gather(
            *(processor.process_update(u, self._app.process_update(u)) for u in fresh)
        )
        first_kept: int | None = None
        ids = sorted({u.update_id for u in updates} | self._unreadable)
        self._unreadable.clear()
        for update_id in ids:
            error = self._failures.pop(update_id, None)
            if error is None or self._give_up(update_id, error):
                self._attempts.pop(update_id, None)
                if first_kept is not None:
                    self._done.add(update_id)
                continue
            if first_kept is None:
                first_kept = update_id
        last = ids[-1]
        self._offset = first_kept if first_kept is not None else last + 1
        self._done = {i for i in self._done if i >= self._offset}

    def _give_up(self, update_id: int, error: BaseException) -> bool:
        return not retry_update(self._attempts, update_id, error)

    async def _pause(self, stop: asyncio.Event) -> None:
        """Wait before fetching failed updates again, longer the more often they failed."""
        worst = max(self._attempts.values())
        await _sleep_unless(stop, BACKOFF_SECONDS[min(worst, len(BACKOFF_SECONDS)) - 1])

    async def _confirm(self) -> None:
        """Tell Telegram what was handled (the offset travels with one last short call)."""
        if self._offset is None:
            return
        try:
            # raw, as in `_get_updates`: an unreadable update must not fail or be logged here
            await self._app.bot._post(
                "getUpdates", {"offset": self._offset, "timeout": 0, "limit": 1}
            )
        except Exception as exc:  # the updates come again next time: handled as duplicates
            log.warning("telegram.confirm_failed", error=type(exc).__name__)


def _seconds(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
