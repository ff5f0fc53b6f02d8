"""How discord.py connects: the REST and gateway URLs from the settings, the intents,
and the client class (one connection; shards as many as Discord recommends; or a
configured count and range of shards)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import discord
import structlog
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from bot.config import Settings
from bot.errors import ConfigurationError

log = structlog.get_logger(__name__)

MAX_RATE_LIMIT_WAIT = 60.0  # longer waits for a 429 raise `discord.RateLimited` instead

_pointers = 0
_saved: tuple[str, yarl.URL] | None = None


def discord_token(settings: Settings) -> str:
    """The bot token, or a `ConfigurationError` saying how to set it."""
    if settings.discord_bot_token is None or not settings.discord_bot_token.get_secret_value():
        raise ConfigurationError(
            "DISCORD_BOT_TOKEN is not set. Create a bot in the Discord developer portal and "
            "put its token in the environment or in .env"
        )
    return settings.discord_bot_token.get_secret_value().strip()


@contextlib.contextmanager
def pointed_at(settings: Settings) -> Iterator[None]:
    """Point discord.py's REST base and default gateway at the configured URLs.

    Both are class attributes in discord.py 2.7 (`Route.BASE`,
    `DiscordWebSocket.DEFAULT_GATEWAY`; the client no longer asks `/gateway/bot` unless
    it shards automatically), so they are set while any user is inside this block and
    restored when the last one leaves.
    """
    global _pointers, _saved
    base = settings.discord_api_base_url.rstrip("/")
    gateway = yarl.URL(settings.discord_gateway_url or str(DiscordWebSocket.DEFAULT_GATEWAY))
    if _pointers == 0:
        _saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
        Route.BASE = base
        DiscordWebSocket.DEFAULT_GATEWAY = gateway
    elif (base, gateway) != (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY):
        log.warning("discord.endpoints_conflict", kept=Route.BASE)
    _pointers += 1
    try:
        yield
    finally:
        _pointers -= 1
        if _pointers == 0 and _saved is not None:
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = _saved
            _saved = None


MESSAGE_CONTENT_SETTING = "COMPANION_DISCORD_MESSAGE_CONTENT"


def intents(settings: Settings) -> discord.Intents:
    """Guilds, DMs and guild messages; the privileged message content intent only when
    `COMPANION_DISCORD_MESSAGE_CONTENT` asks for it.

    Without message content, Discord still sends the text of DMs and of server messages
    that mention the bot (a reply that pings the bot is a mention).
    """
    value = discord.Intents.none()
    value.guilds = True
    value.dm_messages = True
    value.guild_messages = True
    value.message_content = settings.discord_message_content
    return value


def shard_ids(settings: Settings) -> list[int] | None:
    """The configured shard ids ("0,1"), checked against the shard count."""
    if settings.discord_shard_ids is None or not settings.discord_shard_ids.strip():
        return None
    if settings.discord_shard_count is None or settings.discord_shard_count == "auto":
        raise ConfigurationError(
            "COMPANION_DISCORD_SHARD_IDS needs COMPANION_DISCORD_SHARD_COUNT as well, as a "
            "number (the total across all processes), not auto"
        )
    try:
        ids = sorted({int(part) for part in settings.discord_shard_ids.split(",") if part.strip()})
    except ValueError as exc:
        raise ConfigurationError(
            "COMPANION_DISCORD_SHARD_IDS must be shard numbers separated by commas, e.g. 0,1"
        ) from exc
    if not ids or ids[0] < 0 or ids[-1] >= settings.discord_shard_count:
        raise ConfigurationError(
            f"COMPANION_DISCORD_SHARD_IDS must be between 0 and {settings.discord_shard_count - 1}"
        )
    return ids


def client_options(settings: Settings) -> dict[str, Any]:
    """Options every client of ours shares: minimal intents and caches, no pings, and a
    bound on how long a request waits out a rate limit."""
    options: dict[str, Any] = {
        "intents": intents(settings),
        "allowed_mentions": discord.AllowedMentions.none(),
        "max_messages": None,
        "member_cache_flags": discord.MemberCacheFlags.none(),
        "chunk_guilds_at_startup": False,
        "max_ratelimit_timeout": MAX_RATE_LIMIT_WAIT,
    }
    if settings.discord_application_id is not None:
        options["application_id"] = settings.discord_application_id
    return options


def build_client(settings: Settings) -> discord.Client:
    """The gateway client: one connection without a shard count; with `auto`, an
    `AutoShardedClient` that asks Discord how many shards to run (all in this process);
    with a number, those shards (or this process's `COMPANION_DISCORD_SHARD_IDS`)."""
    # The companion never joins voice: skip discord.py's warnings about voice libraries.
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
    options = client_options(settings)
    count = settings.discord_shard_count
    if count is None:
        return discord.Client(**options)
    ids = shard_ids(settings)
    if count == "auto":
        return discord.AutoShardedClient(**options)
    if ids is not None:
        options["shard_ids"] = ids
    return discord.AutoShardedClient(shard_count=count, **options)
