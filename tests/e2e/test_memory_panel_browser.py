"""The memory panel in a real headless Chromium (Debian's `chromium`, driven by
Playwright): opened through a valid Telegram initData and through a signed link; edit,
forget and undo, bulk forget, clear everything and undo within the countdown, filter.
Each step is checked in the database and in the next prompt the fake model receives.
The screenshots in docs/ (Telegram light and dark, desktop) are taken here
(`COMPANION_PANEL_SCREENSHOTS=1 pytest tests/e2e/test_memory_panel_browser.py`).

With `CI` set a missing browser fails the run; it is never skipped there."""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from adapters.ops_http import OpsServer, panel_app
from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.domain import IncomingMessage
from memory.store.diary import save_entry
from memory.store.items import Candidate
from memory.store.tables import Memory, Thread
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM
from tests.support.panel import BOT_TOKEN, PANEL_SECRET, init_data, link_in

DOCS = Path(__file__).resolve().parents[2] / "docs"


def shot(name: str, tmp_path: Path) -> str:
    """Where a screenshot goes: docs/ when COMPANION_PANEL_SCREENSHOTS=1 (to refresh the
    README's), else the test's own folder (so a test run leaves the tree clean)."""
    folder = DOCS if os.environ.get("COMPANION_PANEL_SCREENSHOTS") == "1" else tmp_path
    return str(folder / f"memory-panel-{name}.png")


FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LIGHT = {
    "bg_color": "#ffffff",
    "text_color": "#000000",
    "hint_color": "#707579",
    "link_color": "#3390ec",
    "button_color": "#3390ec",
    "button_text_color": "#ffffff",
    "secondary_bg_color": "#f4f4f5",
}
DARK = {
    "bg_color": "#212121",
    "text_color": "#ffffff",
    "hint_color": "#aaaaaa",
    "link_color": "#8774e1",
    "button_color": "#8774e1",
    "button_text_color": "#ffffff",
    "secondary_bg_color": "#181818",
}
PHONE = {"width": 390, "height": 844}
TEXT_OF = "document.querySelector('#card-m{} .text').textContent"
UNNAMED_CONTROLS = """
Array.from(document.querySelectorAll('button, input, select, textarea, a[href]'))
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
    && !(el.textContent || '').trim() && el.type !== 'hidden')
  .map((el) => el.outerHTML)
"""


def chromium() -> str:
    """The Chromium to drive: `COMPANION_CHROMIUM`, else Debian's."""
    path = os.environ.get("COMPANION_CHROMIUM") or shutil.which("chromium") or ""
    if not path or not Path(path).exists():
        message = "no Chromium: apt-get install -y chromium (.ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def served(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
    clock: FakeClock,
    tmp_path: Path,
) -> AsyncIterator[tuple[Core, str]]:
    """A core with the panel on, served on a loopback port: (core, its public URL)."""
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        burst_window_seconds=0.05,
        public_url=public,
        telegram_bot_token=BOT_TOKEN,
        panel_secret=PANEL_SECRET,
    )
    core = await build_core(settings, llm=scripted_llm, clock=clock)
    server = OpsServer(core.engine, core.health, host="127.0.0.1", port=port, panel=panel_app(core))
    await server.start()
    try:
        yield core, public
    finally:
        await server.stop()
        await core.aclose()


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Headless Chromium."""
    path = chromium()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=path, args=FLAGS)
        yield launched
        await launched.close()


SEED: tuple[tuple[str, str, str, str, float, dict[str, int]], ...] = (
    ("Their sister is called Ana", "relationship", "core", "user", 1.0, {}),
    ("They keep bees on the roof", "fact", "core", "extracted", 0.9, {}),
    ("They like figs", "preference", "core", "extracted", 0.7, {}),
    ("They own a kayak", "fact", "core", "user", 1.0, {}),
    ("Job interview at Acme on Friday", "event", "active", "extracted", 0.55, {"at": 4}),
    ('<script>alert("x")</script> is their band name', "fact", "core", "extracted", 0.8, {}),
    ("Preparing slides for the Acme interview", "goal", "active", "extracted", 0.8, {"at": 2}),
)


async def seed(core: Core, platform: str, user: str) -> int:
    """A person with memories of every kind the panel shows (told, noticed, edited with
    history, pinned, unsure, in a thread) and a diary entry; their id. Live: m1, m2,
    m3, m5, m6, m7 and m8 (m4 edited)."""
    person = await core.store.ensure_person(
        platform=platform, platform_user_id=user, chat_id=user, display_name="Ann"
    )
    now = core.clock.now()
    for content, category, tier, source, confidence, extra in SEED:
        at = now + timedelta(days=extra["at"]) if "at" in extra else None
        await core.memories.add(
            person.id,
            Candidate(
                content,
                category,
                tier,
                importance=6,
                confidence=confidence,
                event_at=at,
                expires_at=at + timedelta(days=7) if at else None,
            ),
            source=source,
            actor="user" if source == "user" else "extraction",
        )
    await core.memories.pin(person.id, 1, limit=20)
    await core.memories.edit(person.id, 4, "They own a red kayak", source_message_ids=[])
    async with core.sessions.begin() as db:
        thread = Thread(user_id=person.id, title="Interview at Acme")
        db.add(thread)
        await db.flush()
        await db.execute(
            update(Memory)
            .where(Memory.user_id == person.id, Memory.short_id.in_((5, 7)))
            .values(thread_id=thread.id)
        )
        await db.execute(
            update(Memory)
            .where(Memory.user_id == person.id, Memory.short_id == 5)
            .values(unsure=True)
        )
    await save_entry(
        core.sessions,
        user_id=person.id,
        local_date=now.date() - timedelta(days=1),
        lines=["Ann told me about the interview at Acme; nervous but prepared."],
        notes_to_self=["Ask how the slides are going."],
        source_message_ids=[],
        now=now,
    )
    return person.id


async def live(core: Core, user_id: int) -> dict[int, str]:
    async with core.sessions() as db:
        rows = await db.scalars(
            select(Memory).where(
                Memory.user_id == user_id,
                Memory.valid_until.is_(None),
                Memory.status.in_(("active", "dying")),
            )
        )
        return {row.short_id: row.content for row in rows}


async def next_prompt(core: Core, llm: ScriptedLLM, platform: str, user: str) -> str:
    await core.router.handle(IncomingMessage(platform, user, "how are things?", chat_id=user))
    return llm.last_prompt_text()


async def open_in_telegram(page: Page, public: str, data: str, theme: dict[str, str]) -> None:
    fragment = (
        f"tgWebAppData={quote(data, safe='')}&tgWebAppVersion=8.0&tgWebAppPlatform=ios"
        f"&tgWebAppThemeParams={quote(json.dumps(theme), safe='')}"
    )
    await page.goto(f"{public}/memory-panel/tg#{fragment}")
    await page.wait_for_url(f"{public}/memory-panel/")
    await expect(page.locator("#card-m1")).to_be_visible()


async def test_telegram_opens_with_its_theme_light_and_dark(
    served: tuple[Core, str], browser: Browser, clock: FakeClock, tmp_path: Path
) -> None:
    core, public = served
    await seed(core, "telegram", "4242")
    alerts: list[str] = []
    for name, theme, seconds in (("light", LIGHT, 5), ("dark", DARK, 6)):
        context = await browser.new_context(viewport=PHONE, device_scale_factor=2)
        page = await context.new_page()
        page.on("dialog", lambda dialog: alerts.append(dialog.message))
        data = init_data(4242, auth_date=clock.now() - timedelta(seconds=seconds))
        await open_in_telegram(page, public, data, theme)
        assert page.url == f"{public}/memory-panel/"  # no initData left in the address
        background = await page.evaluate("getComputedStyle(document.body).backgroundColor")
        expected = "rgb(255, 255, 255)" if name == "light" else "rgb(33, 33, 33)"
        assert background == expected
        hostile = await page.evaluate(TEXT_OF.format(6))
        assert hostile == '<script>alert("x")</script> is their band name'
        await page.screenshot(path=shot(f"telegram-{name}", tmp_path))
        await context.close()
    assert alerts == []  # the hostile memory text never ran


async def test_a_signed_link_opens_the_panel_and_every_change_reaches_the_next_prompt(
    served: tuple[Core, str], browser: Browser, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    core, public = served
    user_id = await seed(core, "console", "alice")
    reply = await core.router.handle(
        IncomingMessage("console", "alice", "/memory", chat_id="alice")
    )
    url, _ = link_in(reply.text)
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await page.goto(url)
    await page.wait_for_url(f"{public}/memory-panel/")  # the token is gone from the address
    await expect(page.locator("#card-m1")).to_be_visible()
    await page.locator(".more summary").click()  # the filters, open
    await page.screenshot(path=shot("desktop", tmp_path), full_page=True)
    toast = page.locator("#toast-text")

    # Edit m3 inline.
    await page.locator("#card-m3 [data-act=edit]").click()
    await page.locator("#edit-m3").fill("They love fresh figs")
    await page.locator("#card-m3 button[type=submit]").click()
    await expect(toast).to_contain_text("Updated")
    assert (await live(core, user_id))[9] == "They love fresh figs"
    assert 3 not in await live(core, user_id)
    prompt = await next_prompt(core, scripted_llm, "console", "alice")
    assert "love fresh figs" in prompt and "They like figs" not in prompt
    await expect(page.locator("#card-m9 .text")).to_have_text("They love fresh figs")

    # Forget m2, then undo from the toast.
    await page.locator("#card-m2 [data-act=forget]").click()
    await expect(toast).to_contain_text("Forgotten")
    assert 2 not in await live(core, user_id)
    assert "bees" not in await next_prompt(core, scripted_llm, "console", "alice")
    await page.locator("#toast-undo").click()
    await expect(toast).to_contain_text("Undone")
    assert 2 in await live(core, user_id)
    assert "keep bees" in await next_prompt(core, scripted_llm, "console", "alice")

    # Select two and forget them together.
    await page.locator("#card-m2 .pick").check()
    await page.locator("#card-m8 .pick").check()
    await expect(page.locator("#bulk-forget")).to_have_text("Forget selected (2)")
    await page.locator("#bulk-forget").click()
    await expect(toast).to_contain_text("Forgotten: 2 memories")
    assert set(await live(core, user_id)) == {1, 5, 6, 7, 9}
    prompt = await next_prompt(core, scripted_llm, "console", "alice")
    assert "bees" not in prompt and "kayak" not in prompt

    # Filter: by tier, by words, pinned.
    cards = page.locator(".card:visible")
    await page.locator("#f-tier").select_option("active")
    await expect(cards).to_have_count(2)
    await expect(cards.first).to_contain_text("Acme")
    await page.locator("#f-unsure").check()
    await expect(cards).to_have_count(1)
    await expect(cards.first).to_contain_text("Job interview at Acme")
    await page.locator("#f-unsure").uncheck()
    await page.locator("#f-tier").select_option("")
    await page.locator("#q").fill("FIGS")
    await expect(cards).to_have_count(1)
    await page.locator("#q").fill("")
    await page.locator("#f-pinned").check()
    await expect(cards).to_have_count(1)
    await expect(cards.first).to_contain_text("sister is called Ana")
    await page.locator("#f-pinned").uncheck()
    await expect(cards).to_have_count(5)

    # By keyboard: confirm the unsure interview; every control has a name.
    await page.locator("#card-m5 [data-act=confirm]").focus()
    await page.keyboard.press("Enter")
    await expect(toast).to_contain_text("I'm sure of")
    async with core.sessions() as db:
        interview = await db.scalar(
            select(Memory).where(Memory.user_id == user_id, Memory.short_id == 5)
        )
    assert interview is not None and not interview.unsure
    assert interview.confidence == pytest.approx(0.7) and interview.mention_count == 2
    await expect(page.locator("#card-m5 [data-act=confirm]")).to_have_count(0)
    await expect(page.locator("#card-m5 [data-act=edit]")).to_be_focused()
    unnamed = await page.evaluate(UNNAMED_CONTROLS)
    assert unnamed == []
    await context.close()


async def test_clear_everything_and_undo_within_the_countdown(
    served: tuple[Core, str], browser: Browser, scripted_llm: ScriptedLLM
) -> None:
    core, public = served
    user_id = await seed(core, "console", "alice")
    reply = await core.router.handle(
        IncomingMessage("console", "alice", "/memory", chat_id="alice")
    )
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    await page.goto(link_in(reply.text)[0])
    await page.wait_for_url(f"{public}/memory-panel/")
    clear = page.locator("#clear-all")
    await expect(clear).to_be_disabled()
    await page.locator("#clear-confirm").fill("clear every")
    await expect(clear).to_be_disabled()
    await page.locator("#clear-confirm").fill("clear everything")
    await expect(clear).to_be_enabled()
    await clear.click()
    toast = page.locator("#toast-text")
    await expect(toast).to_contain_text("Forgotten: 7 memories. (")
    await expect(page.locator(".card")).to_have_count(0)
    assert await live(core, user_id) == {}
    prompt = await next_prompt(core, scripted_llm, "console", "alice")
    assert "sister" not in prompt and "bees" not in prompt
    await page.locator("#toast-undo").click()
    await expect(toast).to_contain_text("Undone — 7 memories are back.")
    assert len(await live(core, user_id)) == 7
    await expect(page.locator(".card")).to_have_count(7)
    prompt = await next_prompt(core, scripted_llm, "console", "alice")
    assert "sister is called Ana" in prompt

    await page.locator("#sign-out").click()
    await expect(page.locator("h1")).to_have_text("You're not signed in")
    await context.close()
