"""Slash commands and button presses → the core.

Every interaction is deferred first (the core may take longer than Discord's three
seconds), then answered. Outside the bot's own DM every answer is ephemeral, so
nothing personal is ever posted publicly.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast

import discord
import structlog

from adapters.discord_bot.messages import PLATFORM, SORRY
from adapters.discord_bot.rendering import Interaction, answer_interaction, has_content
from adapters.inflight import InFlight
from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.domain import ButtonPress, IncomingMessage, Reply

log = structlog.get_logger(__name__)

ALREADY_ACKNOWLEDGED = 40060
"""Discord's error code for a second response to one interaction."""


def in_bot_dm(interaction: Interaction) -> bool:
    """Whether the interaction happened in the person's DM with the bot (else: ephemeral)."""
    return interaction.context.dm_channel


class InteractionHandler:
    """Runs slash commands (`run_command`) and button presses (`on_companion_press`)."""

    def __init__(self, *, core: Core, inflight: InFlight) -> None:
        self._core = core
        self._inflight = inflight

    async def run_command(self, interaction: Interaction, name: str, args: str) -> None:
        """`/name args` through the router, answered as a (usually ephemeral) followup."""
        with self._inflight.track():
            try:
                await self._command(interaction, name, args)
            except discord.HTTPException as exc:
                _undelivered("discord.command_undelivered", exc)

    async def _command(self, interaction: Interaction, name: str, args: str) -> None:
        ephemeral = not in_bot_dm(interaction)
        await interaction.response.defer(ephemeral=ephemeral, thinking=True)
        incoming = IncomingMessage(
            platform=PLATFORM,
            platform_user_id=str(interaction.user.id),
            text=f"/{name} {args}".strip(),
            chat_id=_chat_id(interaction),
            display_name=interaction.user.display_name,
            sent_at=interaction.created_at,
            is_private=not ephemeral,
            locale=str(interaction.locale),
        )
        reply = await _core_reply(self._core.router.handle(incoming), command=name)
        if not has_content(reply):
            await interaction.delete_original_response()
            return
        await answer_interaction(interaction, reply, ephemeral=ephemeral)
        log.info("discord.command_answered", command=name, ephemeral=ephemeral)

    async def on_companion_press(self, interaction: Interaction, action: str) -> None:
        """A button press through the router; the answer replaces the pressed message."""
        with self._inflight.track():
            try:
                await self._press(interaction, action)
            except discord.HTTPException as exc:
                _undelivered("discord.press_undelivered", exc)

    async def _press(self, interaction: Interaction, action: str) -> None:
        private = in_bot_dm(interaction)
        await interaction.response.defer()
        press = ButtonPress(
            platform=PLATFORM,
            platform_user_id=str(interaction.user.id),
            action=action,
            chat_id=_chat_id(interaction),
            display_name=interaction.user.display_name,
            is_private=private,
            message_id=str(interaction.message.id) if interaction.message is not None else None,
        )
        reply = await _core_reply(self._core.router.press(press), press=True)
        if not has_content(reply):
            return
        message = interaction.message
        public = not private and not (message is not None and message.flags.ephemeral)
        in_place = reply.text != STALE_BUTTON and not (reply.private and public)
        await answer_interaction(interaction, reply, ephemeral=not private, edit=in_place)
        log.info("discord.press_answered", in_place=in_place)

    async def on_interaction(self, interaction: Interaction) -> None:
        """A press the view store cannot dispatch (button not on its message) is answered too."""
        if interaction.type is not discord.InteractionType.component:
            return
        data = cast(dict[str, Any], interaction.data or {})
        custom_id = data.get("custom_id")
        if not isinstance(custom_id, str) or _shows_button(interaction.message, custom_id):
            return
        log.info("discord.press_unmatched", length=len(custom_id))
        await self.on_companion_press(interaction, custom_id)


def _undelivered(event: str, exc: discord.HTTPException) -> None:
    """Log why an interaction went unanswered.

    Discord may deliver one interaction twice (a RESUME replays events); the first
    delivery acknowledged and ran it, so the repeat fails its deferral before reaching
    the core, which is expected rather than a warning.
    """
    if exc.code == ALREADY_ACKNOWLEDGED:
        log.info("discord.interaction_repeated", code=exc.code)
        return
    log.warning(event, status=exc.status, code=exc.code)


async def _core_reply(call: Awaitable[Reply], **fields: object) -> Reply:
    """The core's reply, or an apology if the core failed (logged with its traceback)."""
    try:
        return await call
    except Exception:
        log.exception("discord.core_failed", **fields)
        return Reply(SORRY)


def _chat_id(interaction: Interaction) -> str | None:
    return str(interaction.channel_id) if interaction.channel_id is not None else None


def _shows_button(message: discord.Message | None, custom_id: str) -> bool:
    """Whether the message carries a component with this custom id (then it is dispatched)."""
    if message is None:
        return False
    return any(
        getattr(child, "custom_id", None) == custom_id
        for row in message.components
        for child in getattr(row, "children", ())
    )
