"""How a person gets into the memory panel from a chat: on Telegram a Web App button
(the page signs them in with Telegram's `initData`); elsewhere a signed one-time link
with a short expiry. Without a public URL there is no panel."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

import structlog

from bot.config import Settings
from bot.panel.auth import LinkSigner
from memory.store.database import Database
from memory.store.panel_access import SqlPanelAccess
from memory.store.ports import Clock
from memory.store.records import Person

log = structlog.get_logger(__name__)

PANEL_PATH = "memory-panel/"
BUTTON_LABEL = "🗂 Open memory panel"


@dataclass(frozen=True, slots=True)
class PanelEntry:
    """The way in offered under `/memory`: a Telegram Web App button, or a link."""

    url: str
    web_app: bool


@dataclass(frozen=True, slots=True)
class PanelSettings:
    """The panel's knobs (from `Settings`)."""

    public_url: str
    link_ttl: timedelta = timedelta(minutes=10)
    session_ttl: timedelta = timedelta(hours=1)
    telegram_max_age: timedelta = timedelta(minutes=10)

    @property
    def base(self) -> str:
        """The panel's own address, ending in '/'."""
        return self.public_url.rstrip("/") + "/" + PANEL_PATH

    @property
    def secure(self) -> bool:
        """Whether the panel is served over HTTPS (its cookie is then Secure)."""
        return self.public_url.lower().startswith("https://")


class PanelLinks:
    """Issues the ways into the panel."""

    def __init__(
        self,
        settings: PanelSettings,
        *,
        signer: LinkSigner,
        access: SqlPanelAccess,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.signer = signer
        self.access = access
        self.clock = clock

    async def entry(self, person: Person, *, platform: str, private: bool) -> PanelEntry | None:
        """The way in for a person asking on `platform`; None in a group chat (a Web App
        button is refused outside private chats, and a link is personal)."""
        if not private:
            return None
        if platform == "telegram":
            return PanelEntry(self.settings.base + "tg", web_app=True)
        now = self.clock.now()
        token, digest, expires = self.signer.issue(now=now, ttl=self.settings.link_ttl)
        await self.access.issue_link(user_id=person.id, digest=digest, expires_at=expires, now=now)
        return PanelEntry(f"{self.settings.base}open?t={token}", web_app=False)


def panel_links(settings: Settings, sessions: Database, clock: Clock) -> PanelLinks | None:
    """The panel's ways in from the settings; None (the panel is off) without a public URL.

    Without `COMPANION_PANEL_SECRET` the links are signed with a key made at start, so
    only this process can check them (set the secret when several processes serve)."""
    if not settings.public_url:
        return None
    if settings.panel_secret is not None and settings.panel_secret.get_secret_value():
        secret = settings.panel_secret.get_secret_value().encode()
    else:
        log.warning("panel.secret_missing", hint="set COMPANION_PANEL_SECRET for several processes")
        secret = secrets.token_bytes(32)
    panel = PanelSettings(
        public_url=settings.public_url,
        link_ttl=timedelta(minutes=settings.panel_link_minutes),
        session_ttl=timedelta(minutes=settings.panel_session_minutes),
        telegram_max_age=timedelta(seconds=settings.panel_telegram_max_age_seconds),
    )
    return PanelLinks(
        panel,
        signer=LinkSigner(secret),
        access=SqlPanelAccess(sessions),
        clock=clock,
    )
