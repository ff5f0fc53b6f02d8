"""Settings errors name the setting; logs never carry personal text or secrets."""

from __future__ import annotations

import pytest

from bot.config import load_settings
from bot.errors import ConfigurationError
from bot.logs import redact


def test_an_invalid_setting_is_named_by_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMPANION_SESSION_IDLE_MINUTES", "soon")
    with pytest.raises(ConfigurationError, match="COMPANION_SESSION_IDLE_MINUTES"):
        load_settings()


def test_a_missing_persona_file_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPANION_PERSONA_FILE", "/nonexistent/persona.md")
    with pytest.raises(ConfigurationError, match="COMPANION_PERSONA_FILE"):
        load_settings()


def test_well_known_settings_have_no_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/d")
    settings = load_settings()
    assert settings.has_llm
    assert settings.database_url is not None
    assert "sk-ant-test" not in repr(settings)


def test_personal_text_is_redacted_at_info_but_kept_at_debug() -> None:
    info = redact(None, "info", {"event": "x", "text": "my diagnosis", "count": 3})
    assert info == {"event": "x", "text": "[redacted]", "count": 3}
    debug = redact(None, "debug", {"event": "x", "text": "my diagnosis"})
    assert debug["text"] == "my diagnosis"


def test_secrets_are_masked_at_every_level() -> None:
    event = redact(
        None,
        "debug",
        {
            "event": "x",
            "error": "bad key sk-ant-api03-abcdef and bot "
            "123456789:AAH5rFj3l2k4j5l6k7j8h9g0f1d2s3a4q5w",
        },
    )
    assert "sk-ant" not in event["error"] and "AAH5" not in event["error"]
