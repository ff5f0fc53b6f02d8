"""The memory panel over HTTP on real PostgreSQL: signing in (Telegram initData, signed
one-time links), the authorisation matrix (forged, expired, replayed and swapped tokens
and initData; one person can never read or change another's memories), CSRF, the
Content-Security-Policy, escaping, rate limits, and every change going through the
slash commands' use cases so the next prompt shows it."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog.testing
from aiohttp.test_utils import TestServer
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.ops_http import build_app, panel_app
from adapters.panel.app import build_panel
from adapters.ratelimit import RateLimiter
from adapters.telegram_bot.outbound import keyboard
from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.domain import IncomingMessage
from bot.panel.auth import LinkSigner
from bot.panel.links import panel_links
from memory.store.diary import save_entry
from memory.store.items import Candidate
from memory.store.tables import Memory, PanelLink, PanelSession
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.support.commands import press, remember, run
from tests.support.panel import BOT_TOKEN, PANEL_SECRET, init_data, link_in

PUBLIC = "http://panel.test"
ORIGIN = {"Origin": PUBLIC}
BASE = "/memory-panel/"
HOSTILE = ['<script>alert("x")</script> likes tea', '"><img src=x onerror=alert(1)> is a dog']

Client = aiohttp.ClientSession


@pytest.fixture
async def core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
    clock: FakeClock,
    tmp_path: Path,
) -> AsyncIterator[Core]:
    """A core with the panel on (a public URL, a bot token, a panel secret)."""
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        burst_window_seconds=0.05,
        public_url=PUBLIC,
        telegram_bot_token=BOT_TOKEN,
        panel_secret=PANEL_SECRET,
        pin_limit=2,
    )
    built = await build_core(settings, llm=scripted_llm, clock=clock)
    yield built
    await built.aclose()


@pytest.fixture
async def server(core: Core) -> AsyncIterator[TestServer]:
    """The companion's web server with the panel mounted."""
    test_server = TestServer(build_app(core.engine, core.health, panel_app(core)))
    await test_server.start_server()
    yield test_server
    await test_server.close()


@pytest.fixture
async def browser(server: TestServer) -> AsyncIterator[Callable[[], Client]]:
    """Makes clients with their own cookies (one per person or device)."""
    opened: list[Client] = []

    def make() -> Client:
        client = aiohttp.ClientSession(
            base_url=str(server.make_url("/")), cookie_jar=aiohttp.CookieJar(unsafe=True)
        )
        opened.append(client)
        return client

    yield make
    for client in opened:
        await client.close()


async def link_for(core: Core, user: str = "alice") -> str:
    """The token of the one-time link `/memory` gives `user` in the terminal."""
    return link_in((await run(core, "/memory", user)).text)[1]


async def open_link(client: Client, token: str) -> int:
    """Exchange a link token as the landing page's form does; the status."""
    async with client.post(
        f"{BASE}open", data={"t": token}, headers=ORIGIN, allow_redirects=False
    ) as response:
        if response.status == 303:
            assert response.headers["Location"] == "./"
        return response.status


async def page(client: Client) -> tuple[int, str]:
    async with client.get(BASE) as response:
        return response.status, await response.text()


async def csrf_of(client: Client) -> str:
    status, html = await page(client)
    assert status == 200, html
    found = re.search(r'data-csrf="([^"]+)"', html)
    assert found
    return found[1]


async def api(
    client: Client, action: str, payload: dict[str, Any], csrf: str | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {**ORIGIN, "X-CSRF-Token": csrf if csrf is not None else await csrf_of(client)}
    async with client.post(f"{BASE}api/{action}", json=payload, headers=headers) as response:
        return response.status, await response.json()


async def signed_in(core: Core, make: Callable[[], Client], user: str = "alice") -> Client:
    client = make()
    assert await open_link(client, await link_for(core, user)) == 303
    return client


async def rows(core: Core, user: str = "alice") -> list[Memory]:
    person = await core.store.ensure_person(
        platform="console", platform_user_id=user, chat_id=f"chat-{user}", display_name=user
    )
    async with core.sessions() as db:
        found = await db.scalars(
            select(Memory).where(Memory.user_id == person.id).order_by(Memory.id)
        )
        return list(found)


def live(found: list[Memory]) -> dict[int, str]:
    return {
        m.short_id: m.content
        for m in found
        if m.valid_until is None and m.status in ("active", "dying")
    }


async def next_prompt(core: Core, llm: ScriptedLLM, user: str = "alice") -> str:
    """What the model sees when `user` next talks."""
    await core.router.handle(
        IncomingMessage("console", user, "how are things?", chat_id=f"chat-{user}")
    )
    return llm.last_prompt_text()


# ---- signing in ----------------------------------------------------------------


async def test_a_signed_link_opens_the_panel_once_and_leaves_no_token_behind(
    core: Core, browser: Callable[[], Client]
) -> None:
    await remember(core, "my sister is called Ana")
    reply = await run(core, "/memory")
    url, token = link_in(reply.text)
    assert url.startswith(f"{PUBLIC}{BASE}open?t=") and "works once, for 10 minutes" in reply.text
    client = browser()
    async with client.get(f"{BASE}open", params={"t": token}) as landing:
        assert landing.status == 200
        assert 'action="open"' in await landing.text()  # looking uses nothing up
    async with client.post(f"{BASE}open", data={"t": token}, headers=ORIGIN) as opened:
        assert opened.status == 200
        assert opened.url.path == BASE and not opened.url.query  # the token is gone
        html = await opened.text()
    assert "sister is called Ana" in html
    cookie = next(c for c in client.cookie_jar if c.key == "companion_panel")
    assert cookie["httponly"] and cookie["samesite"] == "Strict" and not cookie["secure"]

    replay = browser()  # the same link again, from anywhere
    assert await open_link(replay, token) == 403
    assert (await page(replay))[0] == 401


async def test_expired_forged_and_foreign_links_open_nothing(
    core: Core, clock: FakeClock, browser: Callable[[], Client]
) -> None:
    await remember(core, "my sister is called Ana")
    token = await link_for(core)
    client = browser()
    flipped = token[:12] + ("A" if token[12] != "A" else "B") + token[13:]
    assert await open_link(client, flipped) == 403
    assert await open_link(client, "not-a-token") == 403
    assert await open_link(client, "") == 403
    async with client.get(f"{BASE}open", params={"t": flipped}) as landing:
        assert landing.status == 403
    clock.advance(minutes=10, seconds=1)
    assert await open_link(client, token) == 403
    assert (await page(client))[0] == 401

    foreign, _, _ = LinkSigner(b"another-secret-entirely").issue(
        now=clock.now(), ttl=timedelta(minutes=5)
    )
    assert await open_link(client, foreign) == 403


async def test_a_link_works_only_for_the_person_it_was_issued_to(
    core: Core, browser: Callable[[], Client]
) -> None:
    await remember(core, "alice keeps bees", user="alice")
    await remember(core, "bob plays the oboe", user="bob")
    bob_token = await link_for(core, "bob")
    client = browser()
    assert await open_link(client, bob_token) == 303
    html = (await page(client))[1]
    assert "oboe" in html and "bees" not in html


async def test_telegram_init_data_signs_in_once_while_fresh(
    core: Core, clock: FakeClock, browser: Callable[[], Client]
) -> None:
    person = await core.store.ensure_person(
        platform="telegram", platform_user_id="4242", chat_id="4242", display_name="Ann"
    )
    await core.memories.add(
        person.id,
        Candidate(
            content="Ann runs on Sundays", category="fact", tier="core", importance=5, confidence=1
        ),
        source="user",
        actor="user",
    )
    client = browser()
    async with client.get(f"{BASE}tg") as entry:
        assert entry.status == 200 and 'data-mode="telegram"' in await entry.text()
    data = init_data(4242, auth_date=clock.now() - timedelta(seconds=30))

    async def sign_in(body: str, who: Client = client) -> int:
        async with who.post(
            f"{BASE}session/telegram", json={"init_data": body}, headers=ORIGIN
        ) as response:
            return response.status

    assert await sign_in(data) == 200
    assert "runs on Sundays" in (await page(client))[1]
    assert await sign_in(data) == 200  # the Mini App reloaded: its session goes on

    other = browser()
    assert await sign_in(data, other) == 403  # replayed elsewhere
    forged = data.replace("4242", "4243")
    assert await sign_in(forged, other) == 403
    wrong_bot = init_data(4242, auth_date=clock.now(), bot_token="1:other-bot")
    assert await sign_in(wrong_bot, other) == 403
    stale = init_data(4242, auth_date=clock.now() - timedelta(seconds=601))
    assert await sign_in(stale, other) == 403
    stranger = init_data(777, auth_date=clock.now())  # never wrote to the companion
    assert await sign_in(stranger, other) == 403
    assert await sign_in("", other) == 403
    assert (await page(other))[0] == 401


async def test_telegram_memory_offers_a_web_app_button_only_in_a_private_chat(
    core: Core,
) -> None:
    private = await core.router.handle(
        IncomingMessage("telegram", "4242", "/memory", chat_id="4242", display_name="Ann")
    )
    first = private.buttons[0][0]
    assert first.web_app and first.url == f"{PUBLIC}{BASE}tg"
    assert "memory-panel" not in private.text
    markup = keyboard(private.buttons)
    assert markup is not None
    web_app = markup.inline_keyboard[0][0].web_app
    assert web_app is not None and web_app.url == f"{PUBLIC}{BASE}tg"

    group = await core.router.handle(
        IncomingMessage(
            "telegram", "4242", "/memory", chat_id="-100200", display_name="Ann", is_private=False
        )
    )
    assert not any(b.url for row in group.buttons for b in row)
    assert "memory-panel" not in group.text


async def test_without_a_public_url_memory_works_as_before(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    settings = Settings(database_url=database_url, data_dir=tmp_path)
    plain = await build_core(settings, llm=scripted_llm, clock=clock)
    try:
        assert panel_app(plain) is None
        reply = await run(plain, "/memory")
        assert "memory-panel" not in reply.text
        assert not any(b.url for row in reply.buttons for b in row)
        async with db() as session:
            assert not (await session.scalars(select(PanelLink))).all()
    finally:
        await plain.aclose()


async def test_used_and_expired_sign_ins_and_sessions_are_swept(
    core: Core,
    clock: FakeClock,
    browser: Callable[[], Client],
    db: async_sessionmaker[AsyncSession],
) -> None:
    await signed_in(core, browser)
    clock.advance(days=2)
    await signed_in(core, browser)
    async with db() as session:
        links = (await session.scalars(select(PanelLink))).all()
        sessions = (await session.scalars(select(PanelSession))).all()
    assert [link.expires_at for link in links] == [clock.now() + timedelta(minutes=10)]
    assert [s.expires_at for s in sessions] == [clock.now() + timedelta(minutes=60)]


# ---- authorisation on every request ---------------------------------------------


async def test_one_person_can_never_read_or_change_anothers_memories(
    core: Core, browser: Callable[[], Client]
) -> None:
    await remember(core, "alice keeps bees", "alice likes figs", user="alice")
    await remember(core, "bob plays the oboe", user="bob")
    alice, bob = await signed_in(core, browser), await signed_in(core, browser, "bob")
    alice_csrf, bob_csrf = await csrf_of(alice), await csrf_of(bob)
    assert "bees" not in (await page(bob))[1]
    async with bob.get(f"{BASE}content") as content:
        assert "bees" not in await content.text()

    # Alice's ids name Bob's own memories (or nothing) in Bob's session.
    status, body = await api(bob, "forget", {"ids": [2]}, bob_csrf)
    assert status == 200 and not body["ok"]
    _, forgotten = await api(alice, "forget", {"ids": [1]}, alice_csrf)
    assert forgotten["ok"] and forgotten["undo"]
    _, undone = await api(bob, "undo", {"events": forgotten["undo"]}, bob_csrf)
    assert not undone["ok"]
    assert live(await rows(core)) == {2: "alice likes figs"}
    _, edit = await api(bob, "edit", {"ids": [2], "text": "hacked"}, bob_csrf)
    assert not edit["ok"]
    assert live(await rows(core)) == {2: "alice likes figs"}
    assert live(await rows(core, "bob")) == {1: "bob plays the oboe"}

    # A swapped CSRF token (Alice's, in Bob's session) changes nothing.
    status, _ = await api(bob, "forget", {"ids": [1]}, alice_csrf)
    assert status == 403
    assert live(await rows(core, "bob")) == {1: "bob plays the oboe"}


async def test_changes_need_the_csrf_token_and_the_panels_own_origin(
    core: Core, browser: Callable[[], Client]
) -> None:
    await remember(core, "alice keeps bees")
    client = await signed_in(core, browser)
    csrf = await csrf_of(client)
    for headers in (
        {**ORIGIN},
        {**ORIGIN, "X-CSRF-Token": "wrong"},
        {"X-CSRF-Token": csrf},
        {"Origin": "https://evil.example", "X-CSRF-Token": csrf},
    ):
        async with client.post(f"{BASE}api/forget", json={"ids": [1]}, headers=headers) as r:
            assert r.status == 403
    assert live(await rows(core)) == {1: "alice keeps bees"}
    anonymous = browser()
    status, _ = await api(anonymous, "forget", {"ids": [1]}, csrf)
    assert status == 401


async def test_a_session_ends_when_it_expires_or_is_signed_out(
    core: Core, clock: FakeClock, browser: Callable[[], Client]
) -> None:
    client = await signed_in(core, browser)
    assert (await page(client))[0] == 200
    clock.advance(minutes=61)
    assert (await page(client))[0] == 401
    client = await signed_in(core, browser)
    async with client.post(f"{BASE}sign-out", headers=ORIGIN) as out:
        assert out.status == 200
    assert (await page(client))[0] == 401


async def test_bad_requests_get_a_clear_answer_and_change_nothing(
    core: Core, browser: Callable[[], Client]
) -> None:
    await remember(core, "alice keeps bees")
    client = await signed_in(core, browser)
    csrf = await csrf_of(client)
    for action, payload in (
        ("forget", {}),
        ("forget", {"ids": "1"}),
        ("forget", {"ids": [True]}),
        ("forget", {"ids": [-1]}),
        ("edit", {"ids": [1, 2], "text": "x"}),
        ("edit", {"ids": [1], "text": 5}),
        ("explode", {"ids": [1]}),
        ("undo", {"events": []}),
    ):
        status, body = await api(client, action, payload, csrf)
        assert status == 400 and body["message"] == "I couldn't read that request."
    headers = {**ORIGIN, "X-CSRF-Token": csrf, "Content-Type": "application/json"}
    async with client.post(f"{BASE}api/forget", data="{not json", headers=headers) as r:
        assert r.status == 400
    _, empty = await api(client, "edit", {"ids": [1], "text": "   "}, csrf)
    assert not empty["ok"]
    assert live(await rows(core)) == {1: "alice keeps bees"}


async def test_requests_are_rate_limited(core: Core, server: TestServer) -> None:
    deps = core.commands
    assert deps is not None and deps.panel is not None
    app = build_app(
        core.engine,
        core.health,
        build_panel(deps, deps.panel, limits=RateLimiter(per_minute=1, burst=3)),
    )
    limited = TestServer(app)
    await limited.start_server()
    try:
        async with aiohttp.ClientSession(base_url=str(limited.make_url("/"))) as client:
            statuses = []
            for _ in range(5):
                async with client.get(BASE) as response:
                    statuses.append(response.status)
        assert statuses == [401, 401, 401, 429, 429]
    finally:
        await limited.close()


# ---- what it shows --------------------------------------------------------------


async def test_the_page_escapes_memory_text_and_sends_a_strict_policy(
    core: Core, browser: Callable[[], Client]
) -> None:
    await remember(core, *HOSTILE)
    client = await signed_in(core, browser)
    async with client.get(BASE) as response:
        html = await response.text()
        policy = response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
        assert response.headers["Cache-Control"] == "no-store"
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", html, re.S)
    assert scripts == [""]  # the one static file, nothing inline
    assert not re.search(r"<[^>]*\s(style|on[a-z]+)=", html)  # no inline style or handler


async def test_cards_show_source_confidence_dates_history_threads_and_diary(
    core: Core, browser: Callable[[], Client], clock: FakeClock
) -> None:
    await remember(core, "my sister is called Ana")
    await run(core, "/edit m1 my sister is called Anna")
    person_rows = await rows(core)
    user_id = person_rows[0].user_id
    noticed = await core.memories.add(
        user_id,
        Candidate(
            content="Alice has an interview at Acme",
            category="event",
            tier="active",
            importance=6,
            confidence=0.62,
            event_at=clock.now() + timedelta(days=3),
            expires_at=clock.now() + timedelta(days=10),
        ),
        source="extracted",
        actor="extraction",
    )
    async with core.sessions.begin() as db:
        await db.execute(
            update(Memory).where(Memory.id == noticed.id).values(unsure=True, status="dying")
        )
    await save_entry(
        core.sessions,
        user_id=user_id,
        local_date=clock.now().date(),
        lines=["We talked about Anna."],
        notes_to_self=["Ask about the interview."],
        source_message_ids=[],
        now=clock.now(),
    )
    client = await signed_in(core, browser)
    html = (await page(client))[1]
    card = re.search(r'<article class="card" id="card-m2".*?</article>', html, re.S)
    assert card, html
    assert "you edited" in card[0] and "Earlier versions (1)" in card[0]
    assert "Sister is called Ana" in card[0] or "sister is called Ana" in card[0]
    interview = re.search(r'<article class="card" id="card-m3".*?</article>', html, re.S)
    assert interview
    body = interview[0]
    assert (
        'data-unsure="1"' in body and 'data-faded="1"' in body and 'data-source="noticed"' in body
    )
    assert "I noticed" in body and 'value="62"' in body and "Fades 12 Mar 2026" in body
    assert "On 5 Mar 2026" in body and "Made 2 Mar 2026" in body
    assert 'data-act="confirm"' in body and 'data-act="reject"' in body
    assert "Core · Facts about you" in html or "Core · " in html
    assert "We talked about Anna." in html and "Ask about the interview." in html


# ---- what it does (the slash commands' use cases; the next prompt shows it) ------


async def test_edit_supersedes_and_the_next_prompt_has_the_new_words(
    core: Core, browser: Callable[[], Client], scripted_llm: ScriptedLLM
) -> None:
    await remember(core, "my sister is called Ana")
    client = await signed_in(core, browser)
    status, body = await api(client, "edit", {"ids": [1], "text": "my sister is called Anna"})
    assert status == 200 and body["ok"] and body["message"].startswith("Updated")
    found = await rows(core)
    assert live(found) == {2: "my sister is called Anna"}
    assert found[0].valid_until is not None and found[0].superseded_by == found[1].id
    prompt = await next_prompt(core, scripted_llm)
    assert "called Anna" in prompt and "called Ana\n" not in prompt


async def test_forget_and_undo_and_bulk_forget(
    core: Core, browser: Callable[[], Client], scripted_llm: ScriptedLLM
) -> None:
    await remember(core, "alice keeps bees", "alice likes figs", "alice owns a kayak")
    client = await signed_in(core, browser)
    csrf = await csrf_of(client)
    _, one = await api(client, "forget", {"ids": [1]}, csrf)
    assert one["ok"] and len(one["undo"]) == 1
    assert "keeps bees" not in await next_prompt(core, scripted_llm)
    _, back = await api(client, "undo", {"events": one["undo"]}, csrf)
    assert back["ok"]
    assert live(await rows(core)) == {
        1: "alice keeps bees",
        2: "alice likes figs",
        3: "alice owns a kayak",
    }
    _, many = await api(client, "forget", {"ids": [2, 3]}, csrf)
    assert many["ok"] and many["message"] == "Forgotten: 2 memories."
    assert live(await rows(core)) == {1: "alice keeps bees"}
    prompt = await next_prompt(core, scripted_llm)
    assert "keeps bees" in prompt and "figs" not in prompt and "kayak" not in prompt
    async with core.sessions.begin() as db:  # a faded memory can be forgotten too
        await db.execute(update(Memory).where(Memory.short_id == 1).values(status="dead"))
    _, faded = await api(client, "forget", {"ids": [1]}, csrf)
    assert faded["ok"] and (await rows(core))[0].status == "forgotten"


async def test_pin_within_the_limit_and_unpin(core: Core, browser: Callable[[], Client]) -> None:
    await remember(core, "alice keeps bees", "alice likes figs", "alice owns a kayak")
    client = await signed_in(core, browser)
    csrf = await csrf_of(client)
    assert (await api(client, "pin", {"ids": [1]}, csrf))[1]["ok"]
    assert (await api(client, "pin", {"ids": [2]}, csrf))[1]["ok"]
    _, full = await api(client, "pin", {"ids": [3]}, csrf)
    assert not full["ok"] and "2 pinned memories" in full["message"]
    assert [m.short_id for m in await rows(core) if m.pinned] == [1, 2]
    assert (await api(client, "unpin", {"ids": [1]}, csrf))[1]["ok"]
    assert [m.short_id for m in await rows(core) if m.pinned] == [2]
    html = (await page(client))[1]
    assert html.index("<h2>Pinned</h2>") < html.index("likes figs") < html.index("keeps bees")


async def test_confirm_and_reject_unsure_memories(
    core: Core, browser: Callable[[], Client], clock: FakeClock
) -> None:
    await remember(core, "alice keeps bees", "alice likes figs")
    async with core.sessions.begin() as db:
        await db.execute(update(Memory).values(unsure=True, confidence=0.6))
    client = await signed_in(core, browser)
    csrf = await csrf_of(client)
    clock.advance(minutes=30)
    _, yes = await api(client, "confirm", {"ids": [1]}, csrf)
    assert yes["ok"]
    _, no = await api(client, "reject", {"ids": [2]}, csrf)
    assert no["ok"] and no["undo"]
    first, second = await rows(core)
    assert not first.unsure and first.confidence == pytest.approx(0.75)
    assert first.last_confirmed_at == clock.now() and first.mention_count == 2
    assert second.status == "forgotten"


async def test_clear_everything_and_undo_it(
    core: Core, browser: Callable[[], Client], scripted_llm: ScriptedLLM
) -> None:
    await remember(core, "alice keeps bees", "alice likes figs")
    client = await signed_in(core, browser)
    csrf = await csrf_of(client)
    _, cleared = await api(client, "clear", {}, csrf)
    assert cleared["ok"] and len(cleared["undo"]) == 2
    assert live(await rows(core)) == {}
    prompt = await next_prompt(core, scripted_llm)
    assert "bees" not in prompt and "figs" not in prompt
    _, back = await api(client, "undo", {"events": cleared["undo"]}, csrf)
    assert back["ok"] and back["message"] == "Undone — 2 memories are back."
    assert live(await rows(core)) == {1: "alice keeps bees", 2: "alice likes figs"}
    assert "keeps bees" in await next_prompt(core, scripted_llm)
    _, nothing = await api(client, "undo", {"events": cleared["undo"]}, csrf)
    assert not nothing["ok"]


async def test_export_downloads_everything_but_the_panels_own_secrets(
    core: Core, browser: Callable[[], Client]
) -> None:
    await remember(core, "alice keeps bees")
    client = await signed_in(core, browser)
    async with client.get(f"{BASE}export") as response:
        assert response.status == 200
        assert response.headers["Content-Disposition"].startswith("attachment; filename=")
        data = json.loads(await response.read())
    assert [m["content"] for m in data["memories"]] == ["alice keeps bees"]
    assert "panel_links" not in data and "panel_sessions" not in data
    anonymous = browser()
    async with anonymous.get(f"{BASE}export") as response:
        assert response.status == 401


async def test_forget_all_erases_panel_sign_ins_and_sessions(
    core: Core, browser: Callable[[], Client], db: async_sessionmaker[AsyncSession]
) -> None:
    client = await signed_in(core, browser)
    await link_for(core)
    await press(core, await run(core, "/forget all"), "Yes, erase everything")
    assert (await page(client))[0] == 401
    async with db() as session:
        assert not (await session.scalars(select(PanelLink))).all()
        assert not (await session.scalars(select(PanelSession))).all()


# ---- several processes, HTTPS, logs ----------------------------------------------


def second_process(core: Core, public_url: str = PUBLIC) -> TestServer:
    """The panel as another process serving the same database would: its own
    repositories and signer, the same settings and secret."""
    deps = core.commands
    assert deps is not None and deps.panel is not None
    settings = core.settings.model_copy(update={"public_url": public_url})
    links = panel_links(settings, core.sessions, core.clock)
    assert links is not None
    return TestServer(
        build_app(core.engine, core.health, build_panel(replace(deps, panel=links), links))
    )


async def test_a_link_is_good_in_any_process_but_only_once(
    core: Core, browser: Callable[[], Client]
) -> None:
    await remember(core, "alice keeps bees")
    other = second_process(core)
    await other.start_server()
    try:
        token = await link_for(core)  # issued by this process
        async with aiohttp.ClientSession(
            base_url=str(other.make_url("/")), cookie_jar=aiohttp.CookieJar(unsafe=True)
        ) as there:
            assert await open_link(there, token) == 303
            assert "keeps bees" in (await page(there))[1]
        assert await open_link(browser(), token) == 403  # replayed in the first process
    finally:
        await other.close()


async def test_over_https_the_cookie_is_secure(core: Core) -> None:
    token = await link_for(core)
    secure = second_process(core, "https://panel.test")
    await secure.start_server()
    try:
        async with (
            aiohttp.ClientSession(base_url=str(secure.make_url("/"))) as client,
            client.post(
                f"{BASE}open",
                data={"t": token},
                headers={"Origin": "https://panel.test"},
                allow_redirects=False,
            ) as response,
        ):
            assert response.status == 303
            cookie = response.headers["Set-Cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert "Path=/" in cookie
    finally:
        await secure.close()


async def test_nothing_personal_or_secret_is_logged(
    core: Core, browser: Callable[[], Client], clock: FakeClock
) -> None:
    await remember(core, "alice keeps bees")
    await core.store.ensure_person(
        platform="telegram", platform_user_id="4242", chat_id="4242", display_name="Ann"
    )
    with structlog.testing.capture_logs() as logs:
        token = await link_for(core)
        client = browser()
        assert await open_link(client, token) == 303
        csrf = await csrf_of(client)
        await api(client, "edit", {"ids": [1], "text": "alice keeps wild bees"}, csrf)
        await api(client, "forget", {"ids": [2]}, csrf)
        await open_link(browser(), token)  # refused
        data = init_data(4242, auth_date=clock.now())
        async with browser().post(
            f"{BASE}session/telegram", json={"init_data": data}, headers=ORIGIN
        ) as response:
            assert response.status == 200
    text = json.dumps(logs, default=str)
    assert {"panel.opened", "panel.sign_in_refused", "panel.forgotten"} <= {
        entry["event"] for entry in logs
    }
    for secret in (token, csrf, "bees", data, BOT_TOKEN, PANEL_SECRET):
        assert secret not in text
