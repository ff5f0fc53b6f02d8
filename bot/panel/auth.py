"""Checking who opens the memory panel, without state: Telegram Mini App `initData`
exactly as Telegram specifies, and the companion's own signed one-time link tokens.

Telegram: secret = HMAC-SHA256(key="WebAppData", msg=bot token); the data-check-string
is every received field except `hash`, as `key=value` lines sorted by key; the hash must
equal hex HMAC-SHA256(secret, data-check-string), and `auth_date` must be fresh.

A link token is opaque: base64url(nonce ‖ expiry ‖ HMAC-SHA256(secret, nonce ‖ expiry)
truncated to 16 bytes). The person it opens for is only in the database row of its
digest, so a token cannot be edited into someone else's; the row makes it one-time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl

NONCE_BYTES = 18
EXPIRY_BYTES = 8
SIGNATURE_BYTES = 16
TOKEN_BYTES = NONCE_BYTES + EXPIRY_BYTES + SIGNATURE_BYTES
MAX_INIT_DATA = 4096
CLOCK_SKEW = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class TelegramSignIn:
    """A valid `initData`: the Telegram account it is for, and its digest (to use it once)."""

    telegram_user_id: str
    auth_date: datetime
    digest: str


def digest_of(value: str) -> str:
    """SHA-256 (hex) of a token or initData: what is stored instead of it."""
    return hashlib.sha256(value.encode()).hexdigest()


def check_init_data(
    init_data: str, bot_token: str, *, now: datetime, max_age: timedelta
) -> TelegramSignIn | None:
    """The sign-in `init_data` proves, or None when it is forged, stale or malformed."""
    if not init_data or len(init_data) > MAX_INIT_DATA or not bot_token:
        return None
    try:
        pairs = parse_qsl(init_data, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        return None
    fields = dict(pairs)
    if len(fields) != len(pairs):  # a repeated key is never something Telegram sent
        return None
    received = fields.pop("hash", "")
    check_string = "\n".join(f"{key}={fields[key]}" for key in sorted(fields))
    secret = hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()
    expected = hmac.new(secret, check_string.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, received.lower()):
        return None
    try:
        auth_date = datetime.fromtimestamp(int(fields["auth_date"]), UTC)
        user = json.loads(fields["user"])
        user_id = int(user["id"])
    except (KeyError, ValueError, TypeError, OverflowError):
        return None
    if not now - max_age <= auth_date <= now + CLOCK_SKEW:
        return None
    return TelegramSignIn(str(user_id), auth_date, digest_of(init_data))


class LinkSigner:
    """Makes and checks signed one-time link tokens with one secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the panel secret needs at least 16 bytes")
        self._key = hmac.new(b"companion-panel-link", secret, hashlib.sha256).digest()

    def issue(self, *, now: datetime, ttl: timedelta) -> tuple[str, str, datetime]:
        """A new token, its digest, and when it expires."""
        expires = now + ttl
        body = secrets.token_bytes(NONCE_BYTES) + int(expires.timestamp()).to_bytes(
            EXPIRY_BYTES, "big"
        )
        token = base64.urlsafe_b64encode(body + self._sign(body)).decode().rstrip("=")
        return token, digest_of(token), expires

    def check(self, token: str, *, now: datetime) -> str | None:
        """The digest of a genuine, unexpired token; None for anything else."""
        if not token or len(token) > 80:
            return None
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(raw) != TOKEN_BYTES:
            return None
        body, signature = raw[:-SIGNATURE_BYTES], raw[-SIGNATURE_BYTES:]
        if not hmac.compare_digest(self._sign(body), signature):
            return None
        expires = int.from_bytes(body[NONCE_BYTES:], "big")
        if expires <= now.timestamp():
            return None
        return digest_of(token)

    def _sign(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()[:SIGNATURE_BYTES]
