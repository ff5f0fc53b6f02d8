"""The outbound port: how the core and the scheduler send a message to a person."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from bot.domain import Recipient, Reply


class Delivery(Protocol):
    """Sends to a person's private chat on one platform.

    Returns the platform's message id; raises `DeliveryFailed` with a reason
    ('blocked', 'rate_limited', 'unreachable', 'error') when it cannot.
    """

    platform: str

    async def send(self, recipient: Recipient, reply: Reply) -> str: ...


@runtime_checkable
class EditingDelivery(Delivery, Protocol):
    """A delivery port that can also replace an earlier message of the bot's in place."""

    async def edit(self, chat_id: str, message_id: str, reply: Reply) -> None: ...
