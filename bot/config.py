"""One `Settings` object, read from the environment and `.env`.

Well-known settings keep their conventional names (ANTHROPIC_API_KEY, DATABASE_URL,
TELEGRAM_BOT_TOKEN, DISCORD_BOT_TOKEN, ...); the project's own carry the prefix
`COMPANION_`. `.env.example` documents every one.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.errors import ConfigurationError


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("companion", appauthor=False))


class Settings(BaseSettings):
    """Every setting of the companion."""

    model_config = SettingsConfigDict(
        env_prefix="COMPANION_",
        env_file=".env",
        extra="ignore",
        populate_by_name=True,
    )

    # Language model
    llm_provider: Literal["anthropic", "openai"] = "anthropic"
    anthropic_api_key: SecretStr | None = Field(None, validation_alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(None, validation_alias="ANTHROPIC_BASE_URL")
    openai_base_url: str | None = Field(None, validation_alias="OPENAI_BASE_URL")
    openai_api_key: SecretStr | None = Field(None, validation_alias="OPENAI_API_KEY")
    chat_model: str = "claude-sonnet-4-6"
    fast_model: str = "claude-haiku-4-5"
    llm_timeout_seconds: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(3, ge=0, le=10)
    reply_max_tokens: int = Field(1024, ge=64, le=8192)

    # Storage
    database_url: SecretStr | None = Field(None, validation_alias="DATABASE_URL")
    data_dir: Path = Field(default_factory=_default_data_dir)

    # Conversation
    persona_file: Path | None = None
    session_idle_minutes: int = Field(30, ge=1)
    recent_past_hours: int = Field(48, ge=0, le=24 * 14)
    context_tokens: int = Field(12000, ge=2000)
    max_message_chars: int = Field(8000, ge=100)

    # Memory
    memory_budget_tokens: int = Field(1500, ge=200)
    recall_deadline_ms: int = Field(300, ge=10, le=10000)
    extract_every_n_messages: int = Field(8, ge=1)
    embedding_provider: Literal["minilm", "wordllama", "voyage", "openai"] = "minilm"
    embedding_dim: int = Field(384, ge=16, le=4096)
    voyage_api_key: SecretStr | None = Field(None, validation_alias="VOYAGE_API_KEY")
    voyage_model: str = "voyage-3.5-lite"
    openai_embedding_model: str = "nomic-embed-text"
    pin_limit: int = Field(20, ge=1)
    memory_retention_days: int = Field(90, ge=0)
    """Dead memories are deleted this many days after they died (0 keeps them)."""
    memory_confidence_floor: float = Field(0.4, ge=0, le=0.7)
    """Extracted memories less sure than this are dropped; up to 0.7 they are kept unsure."""

    # Importing chat history
    import_max_bytes: int = Field(50_000_000, ge=1000)
    """The largest export read (unpacked); Telegram bots can download at most 20 MB."""
    import_batch_seconds: float = Field(30.0, gt=0)
    """How often each running import extracts one window (100 messages) in the background."""
    import_input_price_per_mtok: float = Field(1.0, ge=0)
    import_output_price_per_mtok: float = Field(5.0, ge=0)

    # Telegram
    telegram_bot_token: SecretStr | None = Field(None, validation_alias="TELEGRAM_BOT_TOKEN")
    telegram_api_base_url: str = Field(
        "https://api.telegram.org", validation_alias="TELEGRAM_API_BASE_URL"
    )
    telegram_mode: Literal["polling", "webhook"] = "polling"
    telegram_webhook_url: str | None = None
    telegram_webhook_listen: str = "127.0.0.1"
    telegram_webhook_port: int = Field(8443, ge=1, le=65535)
    telegram_webhook_secret: SecretStr | None = None

    # Discord
    discord_bot_token: SecretStr | None = Field(None, validation_alias="DISCORD_BOT_TOKEN")
    discord_application_id: int | None = Field(None, validation_alias="DISCORD_APPLICATION_ID")
    discord_api_base_url: str = Field(
        "https://discord.com/api/v10", validation_alias="DISCORD_API_BASE_URL"
    )
    discord_gateway_url: str | None = Field(None, validation_alias="DISCORD_GATEWAY_URL")
    discord_shard_count: Annotated[int, Field(ge=1)] | Literal["auto"] | None = None
    discord_shard_ids: str | None = None
    discord_message_content: bool = False

    # Adapters (all platforms)
    burst_window_seconds: float = Field(2.0, ge=0)
    rate_limit_per_minute: float = Field(20, gt=0)
    turn_lease_seconds: float = Field(30.0, ge=1)
    """How long a process that died mid-turn keeps the person's turn (renewed while alive)."""

    # Check-ins (the scheduler)
    checkin_concurrency: int = Field(8, ge=1, le=1000)
    """Check-ins composed at once by this process (each a model call); claimed as slots
    free up, so every process takes what it has room for."""
    checkin_grace_minutes: int = Field(120, ge=1)
    """A check-in not sent this long after its time is skipped (counted as missed)."""
    checkin_spread_minutes: int = Field(20, ge=0, le=120)
    """Each person's check-in moves by a stable offset within this many minutes after
    their time (never across quiet hours), so a popular time is not one minute."""

    # Logging
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["auto", "console", "json"] = "auto"

    # Operations
    ops_http_enabled: bool = False
    ops_http_host: str = "127.0.0.1"
    ops_http_port: int = Field(9464, ge=0, le=65535)

    # Memory panel (off without a public URL)
    public_url: str | None = None
    """Where people reach this companion's web server (the memory panel is at
    `<public_url>/memory-panel/`); unset, the panel is off."""
    panel_secret: SecretStr | None = None
    """Signs the panel's one-time links; set it when several processes serve the panel."""
    panel_link_minutes: int = Field(10, ge=1, le=60)
    panel_session_minutes: int = Field(60, ge=5, le=24 * 60)
    panel_telegram_max_age_seconds: int = Field(600, ge=30, le=86400)
    """How fresh Telegram's `auth_date` must be for the Mini App to sign someone in."""

    @field_validator("panel_secret")
    @classmethod
    def _panel_secret_is_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and 0 < len(value.get_secret_value()) < 16:
            raise ValueError("needs at least 16 characters (or leave it unset)")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url_is_http(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        if value is not None and not value.lower().startswith(("https://", "http://")):
            raise ValueError("must start with https:// (or http:// for local testing)")
        return value

    @field_validator("discord_shard_count", mode="before")
    @classmethod
    def _auto_in_any_case(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        return value

    @field_validator("persona_file")
    @classmethod
    def _persona_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no such file: {value}")
        return value

    @property
    def has_llm(self) -> bool:
        """Whether the configured language model can be reached: a key for Anthropic; for
        an OpenAI-compatible server a chat model and a key, or a local address."""
        if self.llm_provider == "openai":
            return self.openai_problem() is None
        return _filled(self.anthropic_api_key)

    def openai_problem(self) -> str | None:
        """What is missing to use the OpenAI-compatible provider, naming the setting."""
        if "chat_model" not in self.model_fields_set:
            return (
                "COMPANION_CHAT_MODEL is not set. With COMPANION_LLM_PROVIDER=openai name the "
                "model the server serves, e.g. COMPANION_CHAT_MODEL=llama3.1:8b for Ollama"
            )
        if not _filled(self.openai_api_key) and not is_local_url(self.openai_base_url):
            where = self.openai_base_url or "the official OpenAI API"
            return (
                f"OPENAI_API_KEY is not set, and {where} is not a local address. Put the "
                "key in the environment or in .env, or point OPENAI_BASE_URL at a local "
                "server (e.g. http://localhost:11434/v1 for Ollama)"
            )
        return None

    @property
    def openai_fast_model(self) -> str:
        """The fast model for the OpenAI-compatible provider: the chat model unless
        COMPANION_FAST_MODEL is set (a local server often serves just one)."""
        return self.fast_model if "fast_model" in self.model_fields_set else self.chat_model


LOCAL_NAMES = ("localhost", "host.docker.internal")
LOCAL_SUFFIXES = (".localhost", ".local", ".internal")
LOCAL_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in (
        "127.0.0.0/8",  # loopback
        "0.0.0.0/32",  # "this host" (connecting to it reaches the loopback)
        "10.0.0.0/8",  # private
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",  # link-local
        "::1/128",
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
    )
)


def is_local_url(url: str | None) -> bool:
    """Whether `url` points at this machine or a private network, where a model server
    needs no key: localhost, host.docker.internal, names ending in .localhost, .local or
    .internal, and IP addresses in loopback, private (10/8, 172.16/12, 192.168/16,
    fc00::/7) or link-local ranges. None (the official API) is not local."""
    if not url:
        return False
    host = (urlsplit(url if "//" in url else f"//{url}").hostname or "").rstrip(".").lower()
    if host in LOCAL_NAMES or host.endswith(LOCAL_SUFFIXES):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in network for network in LOCAL_NETWORKS)


def _filled(secret: SecretStr | None) -> bool:
    return secret is not None and bool(secret.get_secret_value().strip())


_ENV_NAMES = {
    name: (
        field.validation_alias
        if isinstance(field.validation_alias, str)
        else f"COMPANION_{name.upper()}"
    )
    for name, field in Settings.model_fields.items()
    if not isinstance(field.validation_alias, AliasChoices)
}


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning validation errors into one clear `ConfigurationError`."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field_name = str(error["loc"][0]) if error["loc"] else "?"
            env_name = _ENV_NAMES.get(field_name, field_name)
            problems.append(f"{env_name}: {error['msg']}")
        raise ConfigurationError("invalid settings — " + "; ".join(problems)) from exc
