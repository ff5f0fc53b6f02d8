"""The Discord bot's lifecycle: one discord.py client in our event loop, started with
`async with client: await client.start(token)`, run until asked to stop, then closed
after waiting bursts are answered and turns in flight have finished."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import discord
import structlog

from adapters.discord_bot.connection import (
    MESSAGE_CONTENT_SETTING,
    build_client,
    discord_token,
    pointed_at,
)
from adapters.discord_bot.delivery import DiscordDelivery
from adapters.discord_bot.guard import guard_parsers
from adapters.discord_bot.interactions import InteractionHandler
from adapters.discord_bot.messages import PLATFORM, MessageHandler
from adapters.discord_bot.rendering import ActionButton
from adapters.discord_bot.slash_commands import command_tree
from adapters.inflight import InFlight
from adapters.ratelimit import limiter_for
from bot.bootstrap import Core
from bot.config import Settings
from bot.errors import CompanionError, ConfigurationError

log = structlog.get_logger(__name__)

DRAIN_SECONDS = 30.0
CLOSE_GRACE_SECONDS = 2.0
"""How long the closed client may take to stop on its own before its task is cancelled
(an `AutoShardedClient` still launching shards would otherwise retry for ever)."""


class DiscordBot:
    """The client with our handlers, commands and persistent buttons registered."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self.client = build_client(core.settings)
        guard_parsers(self.client._connection.parsers)  # an unparsable event is dropped
        self.delivery = DiscordDelivery(self.client, core.store)
        self.inflight = InFlight()
        limiter = limiter_for(core, PLATFORM)
        self.messages = MessageHandler(
            core=core, client=self.client, inflight=self.inflight, limiter=limiter
        )
        self.interactions = InteractionHandler(core=core, inflight=self.inflight)
        self.tree = command_tree(self.client, self.interactions.run_command)
        self.client.add_dynamic_items(ActionButton)
        for handler in (
            self.messages.on_message,
            self.messages.on_raw_message_edit,
            self.interactions.on_interaction,
            self.interactions.on_companion_press,
            self.on_connect,
            self.on_disconnect,
            self.on_resumed,
            self.on_error,
        ):
            self.client.event(handler)

    async def on_connect(self) -> None:
        """A gateway session began (READY): offer proactive delivery through this client.

        There is deliberately no `on_ready` handler: discord.py fires it from a task that
        may outlive `close()` when the bot stops within seconds of starting.
        """
        self._core.outbound.register(self.delivery)
        self._core.health.set("discord", True, "connected")
        log.info("discord.connected", shards=getattr(self.client, "shard_ids", None))

    async def on_disconnect(self) -> None:
        """The gateway connection dropped; discord.py reconnects (and resumes) on its own."""
        self._core.health.set("discord", False, "reconnecting")
        log.info("discord.disconnected")

    async def on_resumed(self) -> None:
        """A dropped session resumed (missed events are replayed by Discord)."""
        self._core.health.set("discord", True, "connected")
        log.info("discord.resumed")

    async def on_error(self, event: str, *args: Any, **kwargs: Any) -> None:
        """The one place an unexpected handler error is logged, with its traceback."""
        log.exception("discord.handler_failed", handler=event)

    async def drain(self) -> None:
        """Answer waiting bursts and let turns in flight finish."""
        for _ in range(2):  # again for bursts begun by messages that were in flight
            await self.messages.flush()
            if not await self.inflight.wait(DRAIN_SECONDS):
                log.warning("discord.drain_timeout", in_flight=len(self.inflight))
                return


async def run_discord(core: Core, stop: asyncio.Event) -> None:
    """Run the Discord bot until `stop` is set, then finish in-flight turns and close."""
    token = discord_token(core.settings)
    bot = DiscordBot(core)
    with pointed_at(core.settings):
        async with bot.client:
            connection = asyncio.create_task(bot.client.start(token), name="discord-client")
            stopping = asyncio.create_task(stop.wait(), name="discord-stop")
            try:
                await asyncio.wait({connection, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if connection.done():
                    _raise_for(connection, core.settings)
                    return
                log.info("discord.stopping", in_flight=len(bot.inflight))
                await bot.drain()
            finally:
                stopping.cancel()
                core.outbound.unregister(bot.delivery.platform)
                core.health.set("discord", False, "disconnected")
                await bot.client.close()
                await _stopped(connection)
    log.info("discord.stopped")


async def _stopped(connection: asyncio.Task[None]) -> None:
    """Wait for the client we closed; an error while closing is only worth a log line.

    discord.py's sharded client keeps launching the remaining shards after `close()`
    (each failing and retrying every five seconds), so a client that does not stop
    within `CLOSE_GRACE_SECONDS` is cancelled.
    """
    if connection.done():
        return
    done, _ = await asyncio.wait({connection}, timeout=CLOSE_GRACE_SECONDS)
    if not done:
        log.info("discord.close_cancelled", grace_seconds=CLOSE_GRACE_SECONDS)
        connection.cancel()
    try:
        await connection
    except asyncio.CancelledError:
        if _cancelling():
            raise
    except Exception as exc:
        log.info("discord.closed_with_error", error=type(exc).__name__)


def _cancelling() -> bool:
    """Whether the task running this is itself being cancelled (then let that through)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _raise_for(connection: asyncio.Task[None], settings: Settings) -> None:
    """Translate why the client stopped on its own into our errors."""
    error = connection.exception()
    if isinstance(error, discord.LoginFailure):
        raise ConfigurationError("DISCORD_BOT_TOKEN was rejected by Discord") from error
    if isinstance(error, discord.PrivilegedIntentsRequired):
        raise ConfigurationError(_refused_intent(settings)) from error
    if isinstance(error, aiohttp.ClientError | OSError | discord.HTTPException):
        raise CompanionError(f"could not connect to Discord ({type(error).__name__})") from error
    if error is not None:
        raise error
    log.warning("discord.client_stopped")


def _refused_intent(settings: Settings) -> str:
    """What to do when Discord closed the gateway with 4014 (a disallowed intent)."""
    if settings.discord_message_content:
        return (
            f"Discord refused the privileged message content intent that "
            f"{MESSAGE_CONTENT_SETTING}=true asks for: turn on 'Message Content Intent' for "
            f"the bot in the Discord developer portal, or unset {MESSAGE_CONTENT_SETTING}"
        )
    return (
        "Discord refused a privileged intent this bot asks for; enable it for the bot in "
        "the Discord developer portal"
    )
