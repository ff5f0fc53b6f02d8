"""A delivery port that records what it was asked to send."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.domain import Recipient, Reply
from bot.errors import DeliveryFailed


@dataclass
class RecordingDelivery:
    """Accepts every message (or fails with `fail_reason`), keeping a list."""

    platform: str = "console"
    sent: list[tuple[Recipient, Reply]] = field(default_factory=list)
    fail_reason: str | None = None

    async def send(self, recipient: Recipient, reply: Reply) -> str:
        if self.fail_reason is not None:
            raise DeliveryFailed(self.fail_reason)
        self.sent.append((recipient, reply))
        return str(len(self.sent))
