"""The Telegram adapter's pure parts (splitting, escaping, keyboards, mentions, flood
control) and the fake Bot API's HTML checker the end-to-end tests rely on."""

from __future__ import annotations

import random

import aiohttp
import pytest
from telegram.error import RetryAfter

from adapters.telegram_bot.flood import FloodControl
from adapters.telegram_bot.inbound import BotIdentity, command_is_for, strip_mention
from adapters.telegram_bot.markup import to_html
from adapters.telegram_bot.outbound import chunks, keyboard, utf16_len
from bot.domain import Button
from tests.fakes.telegram_api import TOKEN, ApiError, FakeTelegramAPI, auto_entities, parse_html

ME = BotIdentity(42, "companion_test_bot")


def test_chunks_respect_telegram_length_in_utf16_units() -> None:
    text = "🙂" * 5000 + " tail"
    pieces = chunks(text)
    assert all(utf16_len(piece) <= 4096 for piece in pieces)
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")


def test_escaping_survives_telegram_html_parsing() -> None:
    written = 'a < b && c > d <b>not bold</b> "quoted" &amp; 5 * 3 * 4 snake_case_name'
    assert parse_html(to_html(written)) == written


@pytest.mark.parametrize(
    ("markdown", "sent"),
    [
        ("**Good luck** on Friday!", "<b>Good luck</b> on Friday!"),
        ("That sounds *really* hard", "That sounds <i>really</i> hard"),
        ("_so_ proud of you", "<i>so</i> proud of you"),
        ("**big *and* bold**", "<b>big <i>and</i> bold</b>"),
        ("Try `git stash` first", "Try <code>git stash</code> first"),
        ("```python\nif a < b:\n    x = **y**\n```", "<pre>if a &lt; b:\n    x = **y**</pre>"),
        ("## Plan for today", "<b>Plan for today</b>"),
        (
            "[the trail](https://example.org/a?x=1&y=2) is lovely",
            '<a href="https://example.org/a?x=1&amp;y=2">the trail</a> is lovely',
        ),
        ("[click](javascript:alert(1))", "[click](javascript:alert(1))"),
        ("a lone ** and a * star", "a lone ** and a * star"),
        ("2*3*4 and my_var_name", "2*3*4 and my_var_name"),
        ("**unclosed bold and <tags>", "**unclosed bold and &lt;tags&gt;"),
        ("**a *b** c*", "<b>a *b</b> c*"),
    ],
)
def test_markdown_from_the_model_becomes_telegram_html(markdown: str, sent: str) -> None:
    assert to_html(markdown) == sent
    parse_html(sent)  # Telegram accepts it


def test_any_text_converts_to_html_telegram_accepts() -> None:
    markers = ["**", "*", "_", "`", "```", "[", "](", "https://x.org/", ")", "# ", "<", "&", "\n"]
    words = ["a", "b c", "d_e", " "]
    rng = random.Random(3)
    for _ in range(2000):
        text = "".join(rng.choice(markers + words) for _ in range(rng.randint(1, 14)))
        parse_html(to_html(text))  # never malformed, whatever the model writes


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("<b>open", "Can't find end tag"),
        ("<b>x</i>", "Unmatched end tag"),
        ("<script>x</script>", 'Unsupported start tag "script"'),
        ("a < b", "Unsupported start tag"),
        ("fish & chips", "Character entity expected"),
        ("&nbsp;", "Unsupported HTML entity"),
    ],
)
def test_the_fake_rejects_html_like_telegram(raw: str, problem: str) -> None:
    with pytest.raises(ApiError) as rejected:
        parse_html(raw)
    assert rejected.value.status == 400
    assert rejected.value.description.startswith("Bad Request: can't parse entities: ")
    assert problem in rejected.value.description


def test_the_fake_finds_commands_and_mentions_with_utf16_offsets() -> None:
    assert auto_entities("/help@companion_test_bot now") == [
        {"type": "bot_command", "offset": 0, "length": 24}
    ]
    assert auto_entities("🙂 @companion_test_bot hi") == [
        {"type": "mention", "offset": 3, "length": 19}
    ]


def test_keyboards_keep_rows_and_drop_over_long_actions() -> None:
    markup = keyboard(
        (
            (Button("Yes", "c:yes"), Button("Long", "c:" + "é" * 40)),
            (Button("No", "c:no"),),
            (Button("Empty", ""),),
        )
    )
    assert markup is not None
    assert [[b.callback_data for b in row] for row in markup.inline_keyboard] == [
        ["c:yes"],
        ["c:no"],
    ]
    assert keyboard(((Button("x", "y" * 65),),)) is None


def test_mentions_are_stripped_and_commands_addressed() -> None:
    assert strip_mention("@Companion_Test_Bot, how are you?", ME.username) == "how are you?"
    assert strip_mention("so @companion_test_bot what now", ME.username) == "so what now"
    assert strip_mention("mail bob@companion_test_bot.com", ME.username) == (
        "mail bob@companion_test_bot.com"
    )
    assert command_is_for("/help", ME) and command_is_for("/help@Companion_Test_Bot x", ME)
    assert not command_is_for("/help@other_bot", ME)


async def test_flood_control_retries_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    calls = 0

    async def always_flooded() -> bool:
        nonlocal calls
        calls += 1
        raise RetryAfter(2)

    flood = FloodControl(max_retries=2, sleep=sleep)
    with pytest.raises(RetryAfter):
        await flood.process_request(always_flooded, (), {}, "sendMessage", {"chat_id": 7}, None)

    assert (calls, waits) == (3, [2.0, 2.0])


async def test_the_fake_speaks_the_bot_api_over_json_and_forms() -> None:
    async with FakeTelegramAPI() as fake, aiohttp.ClientSession() as client:
        base = f"{fake.base_url}/bot{TOKEN}"
        fake.start_chat(7)
        fake.fail("sendMessage", 429, "Too Many Requests: retry after 3", retry_after=3)

        async with client.post(f"{base}/sendMessage", json={"chat_id": 7, "text": "x"}) as r:
            assert (r.status, r.content_type) == (429, "application/json")
            assert await r.json() == {
                "ok": False,
                "error_code": 429,
                "description": "Too Many Requests: retry after 3",
                "parameters": {"retry_after": 3},
            }
        async with client.post(f"{base}/sendMessage", data={"chat_id": "7", "text": "hi"}) as r:
            body = await r.json()
            assert body["ok"] is True and body["result"]["text"] == "hi"
        async with client.post(f"{fake.base_url}/botWRONG/getMe") as r:
            assert r.status == 401
        fake.push_message(7, "/start")
        async with client.post(f"{base}/getUpdates", json={"timeout": 0}) as r:
            [update] = (await r.json())["result"]
        async with client.post(f"{base}/getUpdates", json={"offset": update["update_id"] + 1}):
            pass

    assert update["message"]["entities"] == [{"type": "bot_command", "offset": 0, "length": 6}]
    assert fake.pending_updates == []
    assert [m.text for m in fake.sent[7]] == ["hi"]
