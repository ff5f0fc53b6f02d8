"""Telegram Mini App sign-ins for the tests, made the way Telegram documents them, and
the panel's one-time link as `/memory` shows it."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import datetime
from urllib.parse import urlencode

BOT_TOKEN = "123456:TEST-token-for-the-panel"
PANEL_SECRET = "a-test-secret-of-at-least-16-bytes"


def init_data(
    telegram_id: int,
    *,
    auth_date: datetime,
    bot_token: str = BOT_TOKEN,
    extra: dict[str, str] | None = None,
) -> str:
    """`initData` as Telegram sends it: url-encoded fields and `hash`, the hex
    HMAC-SHA256 of the sorted `key=value` lines under HMAC-SHA256("WebAppData", token)."""
    fields = {
        "query_id": "AAHdF6IQAAAAAN0XohDhrOrc",
        "user": json.dumps(
            {"id": telegram_id, "first_name": "Ann & <Co>", "language_code": "en"},
            separators=(",", ":"),
        ),
        "auth_date": str(int(auth_date.timestamp())),
        "signature": "ZmFrZS1zaWduYXR1cmUtZm9yLXRoZS10ZXN0cw",
        **(extra or {}),
    }
    check = "\n".join(f"{key}={fields[key]}" for key in sorted(fields))
    secret = hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()
    fields["hash"] = hmac.new(secret, check.encode(), hashlib.sha256).hexdigest()
    return urlencode(fields)


LINK = re.compile(r"(https?://\S+/memory-panel/open\?t=([A-Za-z0-9_-]+))")


def link_in(text: str) -> tuple[str, str]:
    """The panel link in a `/memory` reply, and its token."""
    found = LINK.search(text)
    assert found, f"no panel link in {text!r}"
    return found[1], found[2]
