"""Telegram: python-telegram-bot translating updates into the core's `IncomingMessage`
and `ButtonPress`, and the core's `Reply` into messages, keyboards and files."""

from adapters.telegram_bot.app import (
    TelegramAdapter,
    build_application,
    open_telegram_delivery,
    run_telegram,
)
from adapters.telegram_bot.delivery import TelegramDelivery

__all__ = [
    "TelegramAdapter",
    "TelegramDelivery",
    "build_application",
    "open_telegram_delivery",
    "run_telegram",
]
