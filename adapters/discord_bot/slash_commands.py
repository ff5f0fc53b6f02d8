"""Slash commands from the catalog: one per command, its free-text argument as an
optional string option (a command with a second text, `/edit`, takes both as required
options), usable in servers, the bot's DM and private channels.

They are registered with Discord by `sync_commands` (`companion discord sync-commands`),
once per release, never on every start.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord
import structlog
from discord import app_commands

from adapters.discord_bot.connection import client_options, discord_token, pointed_at
from adapters.discord_bot.rendering import Interaction
from bot.commands.catalog import COMMANDS, CommandInfo
from bot.config import Settings
from bot.errors import CompanionError, ConfigurationError

log = structlog.get_logger(__name__)

CommandRunner = Callable[[Interaction, str, str], Awaitable[None]]
"""Runs `/name args` for an interaction: (interaction, name, args)."""

CONTEXTS = app_commands.AppCommandContext(guild=True, dm_channel=True, private_channel=True)
INSTALLS = app_commands.AppInstallationType(guild=True, user=True)
MAX_DESCRIPTION = 100
UNKNOWN_COMMAND = "I can't do that one (any more). Try /help to see what I can do."


def command_tree(
    client: discord.Client, run: CommandRunner
) -> app_commands.CommandTree[discord.Client]:
    """The client's command tree with every catalog command, each calling `run`."""
    tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(
        client, allowed_contexts=CONTEXTS, allowed_installs=INSTALLS
    )
    for info in COMMANDS:
        tree.add_command(_command(info, run))
    tree.error(_command_error)
    return tree


async def _command_error(interaction: Interaction, error: app_commands.AppCommandError) -> None:
    """A command Discord knows but this build does not (synced earlier): say so briefly."""
    log.warning("discord.command_error", error=type(error).__name__)
    if not interaction.response.is_done():
        await interaction.response.send_message(UNKNOWN_COMMAND, ephemeral=True)


def _command(info: CommandInfo, run: CommandRunner) -> app_commands.Command[Any, ..., None]:
    description = info.description[:MAX_DESCRIPTION]
    if info.argument is None:

        async def without_argument(interaction: Interaction) -> None:
            await run(interaction, info.name, "")

        return app_commands.Command(
            name=info.name, description=description, callback=without_argument
        )

    if info.text_option is not None:
        return _two_options(info, run)

    async def with_argument(interaction: Interaction, args: str | None = None) -> None:
        await run(interaction, info.name, (args or "").strip())

    help_text = (info.argument_help or info.argument)[:MAX_DESCRIPTION]
    renamed = app_commands.rename(args=info.argument)(with_argument)
    described = app_commands.describe(args=help_text)(renamed)
    return app_commands.Command(name=info.name, description=description, callback=described)


def _two_options(info: CommandInfo, run: CommandRunner) -> app_commands.Command[Any, ..., None]:
    """A command with two required options (`/edit` with `id` and `text`), run as
    `/name first second`."""

    async def with_two(interaction: Interaction, first: str, second: str) -> None:
        await run(interaction, info.name, f"{first.strip()} {second.strip()}".strip())

    names = {"first": info.argument or "first", "second": info.text_option or "second"}
    helps = {
        "first": (info.argument_help or names["first"])[:MAX_DESCRIPTION],
        "second": (info.text_option_help or names["second"])[:MAX_DESCRIPTION],
    }
    described = app_commands.describe(**helps)(app_commands.rename(**names)(with_two))
    return app_commands.Command(
        name=info.name, description=info.description[:MAX_DESCRIPTION], callback=described
    )


async def _never_called(interaction: Interaction, name: str, args: str) -> None:
    """Commands built only to be synced are never invoked."""


async def sync_commands(settings: Settings) -> int:
    """Overwrite the bot's global slash commands with the catalog; returns how many."""
    token = discord_token(settings)
    client = discord.Client(**(client_options(settings) | {"intents": discord.Intents.none()}))
    tree = command_tree(client, _never_called)
    with pointed_at(settings):
        async with client:
            try:
                await client.login(token)
                synced = await tree.sync()
            except discord.LoginFailure as exc:
                raise ConfigurationError("DISCORD_BOT_TOKEN was rejected by Discord") from exc
            except discord.HTTPException as exc:
                raise CompanionError(
                    f"Discord refused the command sync (HTTP {exc.status}, code {exc.code})"
                ) from exc
    log.info("discord.commands_synced", count=len(synced))
    return len(synced)
