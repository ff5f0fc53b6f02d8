"""The memory panel's routes (an aiohttp sub-application under `/memory-panel/`).

Signing in: `tg` (Telegram Mini App: the script posts `initData` to `session/telegram`)
or `open?t=…` (a signed one-time link: the page posts the token to `open`, which
redirects to the panel without it). Either starts a session: an HttpOnly, SameSite=Strict
cookie (Secure over HTTPS) naming one person. Every change is a POST to `api/<action>`
with the session's CSRF token and the panel's own Origin. Responses carry a strict
Content-Security-Policy; nothing personal is logged, and the link token never stays in
the address bar.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog
from aiohttp import web

from adapters.panel import pages
from adapters.ratelimit import RateLimiter
from bot.commands.base import CommandDeps
from bot.panel import actions
from bot.panel.auth import check_init_data, digest_of
from bot.panel.links import PanelLinks
from memory.store.records import Person

log = structlog.get_logger(__name__)

STATIC = Path(__file__).parent / "static"
COOKIE = "companion_panel"
MAX_BODY = 131_072  # room for undoing a whole "clear everything"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'self' https://web.telegram.org https://*.telegram.org"
)
SIGNED_OUT = (
    "You're not signed in",
    "Open the panel again from /memory in our private chat: its links work once and "
    "only for a few minutes.",
)
_DEPS = web.AppKey("deps", CommandDeps)
_LINKS = web.AppKey("links", PanelLinks)
_BOT_TOKEN = web.AppKey("bot_token", str)
_LIMITS = web.AppKey("limits", RateLimiter)
_CHANGE_LIMITS = web.AppKey("change_limits", RateLimiter)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every response; rate limits; same-origin POSTs only."""
    limits = request.app[_LIMITS]
    if not limits.allow(request.remote or "?"):
        response: web.StreamResponse = _error(429, "Too many requests — wait a moment.")
    elif request.method == "POST" and request.headers.get("Origin") != _origin(request):
        response = _error(403, "That request didn't come from the panel.")
    else:
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # a missing page or method: answered plainly
            response = web.Response(status=exc.status, text=exc.reason)
    headers = response.headers
    headers["Content-Security-Policy"] = CSP
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "same-origin"  # "no-referrer" would make form posts Origin: null
    headers.setdefault("Cache-Control", "no-store")
    return response


def _origin(request: web.Request) -> str:
    parts = urlsplit(request.app[_LINKS].settings.public_url)
    return f"{parts.scheme}://{parts.netloc}"


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"ok": False, "message": message}, status=status)


def _html(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


async def _signed_in(request: web.Request) -> tuple[Person, str] | None:
    """The person whose session cookie this is, and its CSRF token."""
    cookie = request.cookies.get(COOKIE, "")
    if not cookie or len(cookie) > 100:
        return None
    links = request.app[_LINKS]
    grant = await links.access.session(digest=digest_of(cookie), now=links.clock.now())
    if grant is None:
        return None
    person = await request.app[_DEPS].store.person(grant.user_id)
    return (person, grant.csrf) if person is not None else None


async def _start_session(request: web.Request, response: web.StreamResponse, user_id: int) -> None:
    links = request.app[_LINKS]
    cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    now = links.clock.now()
    await links.access.open_session(
        user_id=user_id,
        digest=digest_of(cookie),
        csrf=csrf,
        expires_at=now + links.settings.session_ttl,
        now=now,
    )
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=int(links.settings.session_ttl.total_seconds()),
        path="/",
        httponly=True,
        secure=links.settings.secure,
        samesite="Strict",
    )


async def panel(request: web.Request) -> web.Response:
    """The panel itself, for the signed-in person."""
    signed = await _signed_in(request)
    if signed is None:
        return _html(pages.message_page(*SIGNED_OUT), status=401)
    person, csrf = signed
    view = await actions.show(request.app[_DEPS], person)
    return _html(pages.panel_page(view, csrf))


async def content(request: web.Request) -> web.Response:
    """The cards, threads and diary again (after a change)."""
    signed = await _signed_in(request)
    if signed is None:
        return _error(401, SIGNED_OUT[1])
    view = await actions.show(request.app[_DEPS], signed[0])
    return _html(pages.content(view))


async def telegram_entry(request: web.Request) -> web.Response:
    """The page a Telegram Web App button opens."""
    return _html(pages.telegram_page())


async def telegram_session(request: web.Request) -> web.StreamResponse:
    """Sign in with Telegram's initData: valid, fresh, for someone known, used once."""
    links = request.app[_LINKS]
    body = await _json(request)
    init_data = str(body.get("init_data", "")) if body is not None else ""
    now = links.clock.now()
    sign_in = check_init_data(
        init_data,
        request.app[_BOT_TOKEN],
        now=now,
        max_age=links.settings.telegram_max_age,
    )
    if sign_in is None:
        log.info("panel.sign_in_refused", kind="telegram")
        return _error(403, "Telegram didn't vouch for this sign-in. Open the panel again.")
    user_id = await links.access.person_of("telegram", sign_in.telegram_user_id)
    if user_id is None:
        return _error(403, "I don't know you yet — say hi to me in Telegram first.")
    signed = await _signed_in(request)
    if signed is not None and signed[0].id == user_id:  # the Mini App reloaded
        return web.json_response({"ok": True})
    fresh = await links.access.use_once(
        user_id=user_id,
        digest=sign_in.digest,
        expires_at=sign_in.auth_date + links.settings.telegram_max_age,
        now=now,
    )
    if not fresh:
        log.info("panel.sign_in_refused", kind="telegram_replay")
        return _error(403, "This sign-in was already used. Open the panel again.")
    response = web.json_response({"ok": True})
    await _start_session(request, response, user_id)
    log.info("panel.opened", user_id=user_id, kind="telegram")
    return response


async def open_link(request: web.Request) -> web.Response:
    """The landing page of a signed link (nothing is used up by looking at it)."""
    token = request.query.get("t", "")
    links = request.app[_LINKS]
    if links.signer.check(token, now=links.clock.now()) is None:
        return _html(pages.message_page(*SIGNED_OUT), status=403)
    return _html(pages.open_page(token))


async def redeem_link(request: web.Request) -> web.StreamResponse:
    """Exchange a one-time link for a session, then drop the token from the address."""
    links = request.app[_LINKS]
    form = await request.post()
    token = str(form.get("t", ""))
    now = links.clock.now()
    digest = links.signer.check(token, now=now)
    user_id = await links.access.redeem_link(digest=digest, now=now) if digest else None
    if user_id is None:
        log.info("panel.sign_in_refused", kind="link")
        return _html(pages.message_page(*SIGNED_OUT), status=403)
    response = web.Response(status=303, headers={"Location": "./"})
    await _start_session(request, response, user_id)
    log.info("panel.opened", user_id=user_id, kind="link")
    return response


async def sign_out(request: web.Request) -> web.Response:
    """End the session."""
    cookie = request.cookies.get(COOKIE, "")
    if cookie:
        await request.app[_LINKS].access.close_session(digest=digest_of(cookie))
    response = web.json_response({"ok": True})
    response.del_cookie(COOKIE, path="/")
    return response


async def export(request: web.Request) -> web.Response:
    """Everything kept about the person, as a download."""
    signed = await _signed_in(request)
    if signed is None:
        return _html(pages.message_page(*SIGNED_OUT), status=401)
    document = await actions.export(request.app[_DEPS], signed[0])
    return web.Response(
        body=document.content,
        content_type=document.mime_type,
        headers={"Content-Disposition": f'attachment; filename="{document.filename}"'},
    )


async def _json(request: web.Request) -> dict[str, Any] | None:
    if request.content_length is not None and request.content_length > MAX_BODY:
        return None
    try:
        body = json.loads(await request.text())
    except (ValueError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _ids(body: dict[str, Any], key: str, limit: int) -> list[int] | None:
    raw = body.get(key)
    if not isinstance(raw, list) or not 0 < len(raw) <= limit:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**31 for v in raw):
        return None
    return [int(v) for v in raw]


async def change(request: web.Request) -> web.Response:
    """One change, for the signed-in person only, with the session's CSRF token."""
    signed = await _signed_in(request)
    if signed is None:
        return _error(401, SIGNED_OUT[1])
    person, csrf = signed
    if not hmac.compare_digest(request.headers.get("X-CSRF-Token", ""), csrf):
        return _error(403, "This page is out of date. Reload it and try again.")
    if not request.app[_CHANGE_LIMITS].allow(person.id):
        return _error(429, "That's a lot of changes at once — wait a moment.")
    body = await _json(request)
    if body is None:
        return _error(400, "I couldn't read that request.")
    outcome = await _run(request.app[_DEPS], person, request.match_info["action"], body)
    if outcome is None:
        return _error(400, "I couldn't read that request.")
    return web.json_response(
        {"ok": outcome.ok, "message": outcome.message, "undo": list(outcome.undo)}
    )


async def _run(
    deps: CommandDeps, person: Person, action: str, body: dict[str, Any]
) -> actions.Outcome | None:
    """The use case an action names, with its checked arguments; None when malformed."""
    if action == "clear":
        return await actions.clear_all(deps, person)
    if action == "undo":
        events = _ids(body, "events", actions.MAX_CLEAR)
        return await actions.undo(deps, person, events) if events else None
    ids = _ids(body, "ids", actions.MAX_BULK)
    if not ids:
        return None
    if action in ("forget", "reject"):
        return await actions.forget(deps, person, ids)
    if len(ids) != 1:
        return None
    short_id = ids[0]
    if action == "edit":
        text = body.get("text")
        if not isinstance(text, str) or len(text) > 2000:
            return None
        return await actions.edit_text(deps, person, short_id, text)
    if action in ("pin", "unpin"):
        return await actions.set_pin(deps, person, short_id, action == "pin")
    if action == "confirm":
        return await actions.confirm(deps, person, short_id)
    return None


def build_panel(
    deps: CommandDeps,
    links: PanelLinks,
    *,
    bot_token: str = "",
    limits: RateLimiter | None = None,
    change_limits: RateLimiter | None = None,
) -> web.Application:
    """The panel's sub-application (mount it at `/memory-panel/`); `limits` counts
    every request by client address, `change_limits` the changes of each person."""
    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY)
    app[_DEPS] = deps
    app[_LINKS] = links
    app[_BOT_TOKEN] = bot_token
    app[_LIMITS] = limits or RateLimiter(per_minute=600, burst=200)
    app[_CHANGE_LIMITS] = change_limits or RateLimiter(per_minute=120, burst=60)
    app.router.add_get("/", panel)
    app.router.add_get("/content", content)
    app.router.add_get("/tg", telegram_entry)
    app.router.add_post("/session/telegram", telegram_session)
    app.router.add_get("/open", open_link)
    app.router.add_post("/open", redeem_link)
    app.router.add_post("/sign-out", sign_out)
    app.router.add_get("/export", export)
    app.router.add_post("/api/{action:[a-z]+}", change)
    app.router.add_static("/static/", STATIC, append_version=False)
    return app
