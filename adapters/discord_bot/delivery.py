"""The `Delivery` port for Discord: proactive messages to a person's DM.

The running bot offers one over its own client (`run_discord` registers it with the
core's outbound messages); a process that runs no bot opens one on a REST-only client
with `open_discord_delivery`. discord.py waits out 429s by itself; a wait longer than
`connection.MAX_RATE_LIMIT_WAIT` becomes `DeliveryFailed('rate_limited')`.

Reasons, as on Telegram: 'blocked' (DMs closed; the identity is marked unreachable),
'rate_limited', 'error' (anything else: network trouble, Discord's server errors, an
unexpected answer).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aiohttp
import discord
import structlog

from adapters.discord_bot.connection import client_options, discord_token, pointed_at
from adapters.discord_bot.rendering import has_content, send_to_channel, view_for
from bot.bootstrap import Core
from bot.domain import Recipient, Reply
from bot.errors import ConfigurationError, DeliveryFailed
from memory.store.people import SqlPeople

log = structlog.get_logger(__name__)

_NETWORK_ERRORS = (aiohttp.ClientError, OSError, TimeoutError, discord.DiscordServerError)


class DiscordDelivery:
    """Sends a reply to a person's Discord DM; returns the id of the last message sent."""

    platform = "discord"

    def __init__(self, client: discord.Client, store: SqlPeople) -> None:
        self._client = client
        self._store = store

    async def send(self, recipient: Recipient, reply: Reply) -> str:
        """DM the reply (split, with buttons and file); `DeliveryFailed` when it cannot."""
        if not has_content(reply):
            raise DeliveryFailed("error", "nothing to send")
        try:
            user = discord.Object(id=int(recipient.platform_user_id))
            channel = await self._client.create_dm(user)
            sent = await send_to_channel(channel, reply)
        except discord.Forbidden as exc:
            await self._store.set_reachable(
                platform=self.platform,
                platform_user_id=recipient.platform_user_id,
                reachable=False,
            )
            log.info("discord.delivery_blocked", user_id=recipient.user_id, code=exc.code)
            raise DeliveryFailed("blocked", f"discord code {exc.code}") from exc
        except discord.RateLimited as exc:
            raise DeliveryFailed("rate_limited", f"retry after {exc.retry_after:.0f}s") from exc
        except _NETWORK_ERRORS as exc:
            raise DeliveryFailed("error", f"{type(exc).__name__}: {str(exc)[:200]}") from exc
        except discord.HTTPException as exc:
            raise DeliveryFailed("error", f"HTTP {exc.status}, code {exc.code}") from exc
        log.info("discord.delivered", user_id=recipient.user_id, messages=len(sent))
        return str(sent[-1].id)

    async def edit(self, chat_id: str, message_id: str, reply: Reply) -> None:
        """Show `reply` in place of an earlier message of the bot's (an import's progress)."""
        channel = self._client.get_partial_messageable(int(chat_id))
        try:
            await channel.get_partial_message(int(message_id)).edit(
                content=reply.text[:2000], view=view_for(reply)
            )
        except discord.HTTPException as exc:
            raise DeliveryFailed("error", f"HTTP {exc.status}, code {exc.code}") from exc


@contextlib.asynccontextmanager
async def open_discord_delivery(core: Core) -> AsyncIterator[DiscordDelivery]:
    """A `DiscordDelivery` on its own REST-only client, for a process that runs no bot."""
    token = discord_token(core.settings)
    client = discord.Client(**(client_options(core.settings) | {"intents": discord.Intents.none()}))
    with pointed_at(core.settings):
        async with client:
            try:
                await client.login(token)
            except discord.LoginFailure as exc:
                raise ConfigurationError("DISCORD_BOT_TOKEN was rejected by Discord") from exc
            yield DiscordDelivery(client, core.store)
