"""The Discord adapter: DMs, mentions and replies in servers, slash commands for the
command catalog, persistent buttons, file attachments, and the `Delivery` port.

Intents: guilds, DM messages and guild messages — not the privileged message content
intent. Discord still delivers the text of DMs and of server messages that mention
the bot (a reply that pings the bot is a mention), which is all the bot answers.
Enable message content (in the developer portal and with
`COMPANION_DISCORD_MESSAGE_CONTENT=true`) only to read server replies whose author
switched the ping off; without it such a reply arrives empty and the bot asks to be
@mentioned. If the setting asks for it and the portal does not allow it, Discord closes
the gateway (4014) and the bot stops with a `ConfigurationError` saying so.

Entry points: `run_discord(core, stop)` runs the bot in the caller's event loop (and
offers its `DiscordDelivery` to `core.outbound` while connected);
`open_discord_delivery(core)` gives a process without the bot a `DiscordDelivery`;
`sync_commands(settings)` registers the slash commands (once per release).
"""

import warnings

with warnings.catch_warnings():
    # discord.py imports the standard library's `audioop` for voice (unused here), which
    # Python 3.11 deprecates; keep that one warning from failing warnings-as-errors runs.
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord  # noqa: F401

from adapters.discord_bot.delivery import DiscordDelivery, open_discord_delivery
from adapters.discord_bot.runner import DiscordBot, run_discord
from adapters.discord_bot.slash_commands import sync_commands

__all__ = [
    "DiscordBot",
    "DiscordDelivery",
    "open_discord_delivery",
    "run_discord",
    "sync_commands",
]
