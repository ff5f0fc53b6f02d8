"""Replies as Discord shows them: text split at 2,000 characters, buttons as a persistent
view whose custom ids are the core's actions, a document as a file attachment."""

from __future__ import annotations

import io
import re
from typing import Any, TypeVar

import discord
import structlog
from discord.utils import MISSING

from adapters.splitting import split_text
from bot.domain import Reply

log = structlog.get_logger(__name__)

T = TypeVar("T")
MAX_CHARS = 2000
MAX_ROWS = 5
MAX_PER_ROW = 5
MAX_LABEL = 80
MAX_CUSTOM_ID = 100
MAX_FILE_BYTES = 10 * 1024 * 1024
PRESS_EVENT = "companion_press"
FILE_TOO_LARGE = "(The file is too large to send here.)"

Interaction = discord.Interaction[discord.Client]


class ActionButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
    template=re.compile(r".{1,100}", re.DOTALL),
):
    """A button whose custom id is the core's action, recognised again after a restart.

    Registered with `Client.add_dynamic_items`, so any press on any message with our
    buttons is dispatched as the client event `companion_press(interaction, action)`;
    nothing per message is kept in memory.
    """

    def __init__(self, label: str, action: str, *, row: int | None = None) -> None:
        button: discord.ui.Button[discord.ui.View] = discord.ui.Button(
            label=label[:MAX_LABEL] or "…",
            custom_id=action,
            style=discord.ButtonStyle.secondary,
            row=row,
        )
        super().__init__(button)
        self.action = action

    @classmethod
    async def from_custom_id(
        cls, interaction: Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> ActionButton:
        """Rebuild the button of a press from the message it was on."""
        return cls(str(getattr(item, "label", None) or "…"), match.string)

    async def callback(self, interaction: Interaction) -> None:
        """Hand the press to the adapter as a client event."""
        interaction.client.dispatch(PRESS_EVENT, interaction, self.action)


def view_for(reply: Reply) -> discord.ui.View | None:
    """The reply's button rows as a persistent view (no timeout), or None."""
    view = discord.ui.View(timeout=None)
    for index, row in enumerate(row for row in reply.buttons if row):
        if index >= MAX_ROWS:
            log.warning("discord.buttons_truncated", rows=len(reply.buttons))
            break
        for button in row[:MAX_PER_ROW]:
            if not 0 < len(button.action) <= MAX_CUSTOM_ID:
                log.warning("discord.button_skipped", action_length=len(button.action))
                continue
            view.add_item(ActionButton(button.label, button.action, row=index))
    return view if view.children else None


def texts_of(reply: Reply) -> list[str]:
    """The reply's text in pieces Discord accepts ('' when there is only a file or buttons)."""
    text = reply.text.strip()
    if reply.document is not None and len(reply.document.content) > MAX_FILE_BYTES:
        text = f"{text}\n\n{FILE_TOO_LARGE}".strip()
    return split_text(text, MAX_CHARS) if text else [""]


def file_of(reply: Reply) -> discord.File | None:
    """The reply's document as an attachment, if it fits."""
    document = reply.document
    if document is None or len(document.content) > MAX_FILE_BYTES:
        return None
    return discord.File(io.BytesIO(document.content), filename=document.filename)


def has_content(reply: Reply) -> bool:
    """Whether there is anything to show."""
    return bool(reply.text.strip() or reply.document is not None or any(reply.buttons))


def _given(value: T | None) -> T:
    """`value`, or discord.py's MISSING (leave the field out) for None."""
    return value if value is not None else MISSING


async def send_to_channel(
    channel: discord.abc.Messageable, reply: Reply, *, reference: discord.Message | None = None
) -> list[discord.Message]:
    """Post a reply (split; buttons and file on the last piece); returns the messages."""
    texts = texts_of(reply)
    sent: list[discord.Message] = []
    for index, text in enumerate(texts):
        last = index == len(texts) - 1
        sent.append(
            await channel.send(
                text or None,
                view=_given(view_for(reply) if last else None),
                file=_given(file_of(reply) if last else None),
                # discord.py's overloads leave out the None that `send` accepts
                reference=reference if index == 0 else None,  # type: ignore[arg-type]
                mention_author=False,
                silent=reply.silent,
            )
        )
    return sent


async def answer_interaction(
    interaction: Interaction, reply: Reply, *, ephemeral: bool, edit: bool = False
) -> None:
    """Answer a deferred interaction: edit the original message (`edit`) or follow up."""
    texts = texts_of(reply)
    for index, text in enumerate(texts):
        last = index == len(texts) - 1
        view = view_for(reply) if last else None
        file = file_of(reply) if last else None
        if index == 0 and edit:
            await interaction.edit_original_response(
                content=text or None,
                view=view,
                attachments=[file] if file is not None else MISSING,
            )
            continue
        await interaction.followup.send(
            text,
            ephemeral=ephemeral,
            view=_given(view),
            file=_given(file),
            silent=reply.silent,
            wait=True,
        )
