"""Who may open the memory panel: Telegram's initData checked exactly as Telegram
specifies, and the signed one-time link tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlencode

import pytest

from bot.config import Settings, load_settings
from bot.errors import ConfigurationError
from bot.panel.auth import LinkSigner, check_init_data, digest_of
from bot.panel.links import PanelSettings, panel_links
from tests.support.panel import BOT_TOKEN, init_data

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
AGE = timedelta(minutes=10)


def check(data: str, token: str = BOT_TOKEN, now: datetime = NOW):  # type: ignore[no-untyped-def]
    return check_init_data(data, token, now=now, max_age=AGE)


def test_genuine_init_data_names_the_telegram_account() -> None:
    data = init_data(4242, auth_date=NOW - timedelta(minutes=1))
    sign_in = check(data)
    assert sign_in is not None
    assert sign_in.telegram_user_id == "4242"
    assert sign_in.auth_date == NOW - timedelta(minutes=1)
    assert sign_in.digest == digest_of(data)


def test_every_field_counts_including_ones_unknown_to_us() -> None:
    data = init_data(4242, auth_date=NOW, extra={"start_param": "x=1&y", "chat_type": "sender"})
    assert check(data) is not None
    fields = dict(parse_qsl(data))
    fields["chat_type"] = "private"  # changed after signing
    assert check(urlencode(fields)) is None


@pytest.mark.parametrize(
    "tamper",
    [
        lambda f: {**f, "user": f["user"].replace("4242", "4243")},  # someone else
        lambda f: {**f, "hash": f["hash"][:-1] + ("0" if f["hash"][-1] != "0" else "1")},
        lambda f: {k: v for k, v in f.items() if k != "hash"},
        lambda f: {**f, "hash": ""},
        lambda f: {**f, "auth_date": str(int(f["auth_date"]) + 1)},
        lambda f: {k: v for k, v in f.items() if k != "signature"},  # it is signed too
    ],
)
def test_forged_init_data_is_refused(tamper) -> None:  # type: ignore[no-untyped-def]
    fields = dict(parse_qsl(init_data(4242, auth_date=NOW)))
    assert check(urlencode(tamper(fields))) is None


def test_init_data_for_another_bot_is_refused() -> None:
    other = init_data(4242, auth_date=NOW, bot_token="999:another-bot")
    assert check(other) is None
    assert check(init_data(4242, auth_date=NOW), token="") is None


def test_stale_or_future_init_data_is_refused() -> None:
    assert check(init_data(1, auth_date=NOW - AGE)) is not None  # the edge is still fresh
    assert check(init_data(1, auth_date=NOW - AGE - timedelta(seconds=1))) is None
    assert check(init_data(1, auth_date=NOW + timedelta(minutes=5))) is None


@pytest.mark.parametrize(
    "data",
    ["", "garbage", "hash=abc", "a=1&a=2&hash=00", "x" * 5000, "user=%ZZ&hash=1"],
)
def test_malformed_init_data_is_refused(data: str) -> None:
    assert check(data) is None


def test_a_repeated_field_is_refused_even_when_signed() -> None:
    genuine = init_data(4242, auth_date=NOW)
    assert check(genuine + "&user=%7B%22id%22%3A1%7D") is None


def test_a_signed_link_token_checks_until_it_expires() -> None:
    signer = LinkSigner(b"s" * 32)
    token, digest, expires = signer.issue(now=NOW, ttl=timedelta(minutes=10))
    assert expires == NOW + timedelta(minutes=10)
    assert signer.check(token, now=NOW) == digest == digest_of(token)
    assert signer.check(token, now=expires - timedelta(seconds=1)) == digest
    assert signer.check(token, now=expires) is None
    assert token.isascii() and "=" not in token and len(token) == 56


def test_link_tokens_are_opaque_and_different_every_time() -> None:
    signer = LinkSigner(b"s" * 32)
    tokens = {signer.issue(now=NOW, ttl=timedelta(minutes=1))[0] for _ in range(50)}
    assert len(tokens) == 50


def test_forged_link_tokens_are_refused() -> None:
    signer = LinkSigner(b"s" * 32)
    token, _, _ = signer.issue(now=NOW, ttl=timedelta(minutes=10))
    other, _, _ = LinkSigner(b"t" * 32).issue(now=NOW, ttl=timedelta(minutes=10))
    assert signer.check(other, now=NOW) is None
    flipped = token[:10] + ("A" if token[10] != "A" else "B") + token[11:]
    assert signer.check(flipped, now=NOW) is None
    for bad in ("", "x", token + "AA", token[:-2], "!" * 56, "A" * 200):
        assert signer.check(bad, now=NOW) is None


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        LinkSigner(b"short")


def test_panel_settings_are_checked_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPANION_PUBLIC_URL", "companion.example")
    with pytest.raises(ConfigurationError, match=r"COMPANION_PUBLIC_URL: .*https://"):
        load_settings()
    monkeypatch.setenv("COMPANION_PUBLIC_URL", "https://companion.example")
    monkeypatch.setenv("COMPANION_PANEL_SECRET", "short")
    with pytest.raises(ConfigurationError, match=r"COMPANION_PANEL_SECRET: .*16 characters"):
        load_settings()
    monkeypatch.setenv("COMPANION_PANEL_SECRET", "")
    monkeypatch.setenv("COMPANION_PUBLIC_URL", "")
    assert load_settings().public_url is None  # an empty setting leaves the panel off


def test_the_panel_is_off_without_a_public_url_and_links_are_https_aware() -> None:
    settings = Settings(public_url=None)
    assert panel_links(settings, None, None) is None  # type: ignore[arg-type]
    on = Settings(public_url="https://companion.example/base/", panel_secret="x" * 16)
    links = panel_links(on, None, None)  # type: ignore[arg-type]
    assert links is not None and links.settings.secure
    assert links.settings.base == "https://companion.example/base/memory-panel/"
    assert not PanelSettings("http://127.0.0.1:8080").secure
