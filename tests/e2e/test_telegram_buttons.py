"""Telegram buttons and files end to end: inline keyboards from `Reply.buttons`, presses
routed to the core and shown in place of the message, forged data, documents.

The flows use small handlers registered on the test's own core, so they exercise the
adapter's rendering and callback plumbing, whatever the real commands say;
`test_telegram_commands` runs the core's real commands and buttons.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from adapters.telegram_bot import TelegramAdapter
from bot.bootstrap import Core
from bot.commands.router import STALE_BUTTON
from bot.domain import Button, ButtonPress, Document, IncomingMessage, Recipient, Reply
from tests.e2e.test_telegram import ALICE, running
from tests.fakes.telegram_api import FakeTelegramAPI, SentMessage

EXPORT = Document("companion-export.json", json.dumps({"memories": ["likes tea"]}).encode())


def page(number: int) -> Reply:
    """Page `number` of three, with previous/next buttons."""
    buttons = []
    if number > 1:
        buttons.append(Button("‹ Prev", f"tpage:{number - 1}"))
    if number < 3:
        buttons.append(Button("Next ›", f"tpage:{number + 1}"))
    return Reply(f"Page {number} of 3", buttons=(tuple(buttons),))


def register_flows(core: Core) -> list[ButtonPress]:
    """Test commands with buttons; returns the presses the core received."""
    presses: list[ButtonPress] = []

    async def pages(incoming: IncomingMessage, args: str) -> Reply:
        return page(1)

    async def turn_page(press: ButtonPress, rest: str) -> Reply:
        presses.append(press)
        return page(int(rest))

    async def forget(incoming: IncomingMessage, args: str) -> Reply:
        return Reply(f"Forgot: {args}", buttons=((Button("Undo", "tundo:m7"),),))

    async def undo(press: ButtonPress, rest: str) -> Reply:
        presses.append(press)
        return Reply(f"Restored {rest}.")

    async def forget_all(incoming: IncomingMessage, args: str) -> Reply:
        confirm = (Button("Yes, forget everything", "tall:yes"), Button("Cancel", "tall:no"))
        return Reply("Forget everything I know about you?", buttons=(confirm,))

    async def confirm(press: ButtonPress, rest: str) -> Reply:
        presses.append(press)
        return Reply("Done — I've forgotten everything." if rest == "yes" else "Kept it all.")

    async def export(incoming: IncomingMessage, args: str) -> Reply:
        return Reply("Here is everything I keep about you.", document=EXPORT)

    async def odd_buttons(incoming: IncomingMessage, args: str) -> Reply:
        row = (Button("Fine", "tpage:2"), Button("Too long", "tpage:" + "9" * 80))
        return Reply("Some buttons", buttons=(row, (Button("Also long", "x" * 65),)))

    for name, handler in {
        "tpages": pages,
        "tforget": forget,
        "tforgetall": forget_all,
        "texport": export,
        "todd": odd_buttons,
    }.items():
        core.router.register(name, handler)
    core.router.register_press("tpage", turn_page)
    core.router.register_press("tundo", undo)
    core.router.register_press("tall", confirm)
    return presses


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    """The fake Bot API."""
    async with FakeTelegramAPI() as api:
        yield api


@pytest.fixture
async def presses(core: Core) -> list[ButtonPress]:
    """The button flows, registered on the core."""
    return register_flows(core)


@pytest.fixture
async def adapter(
    core: Core, fake: FakeTelegramAPI, presses: list[ButtonPress]
) -> AsyncIterator[TelegramAdapter]:
    """The adapter, polling the fake."""
    async with running(core, fake) as started:
        yield started


async def press(fake: FakeTelegramAPI, message: SentMessage, label: str) -> str:
    """Press the button `label` under `message`; wait for the query to be answered."""
    query_id = fake.push_callback(ALICE, message.action(label), message.message_id)
    await fake.wait_for(
        lambda: any(a["callback_query_id"] == query_id for a in fake.callback_answers)
    )
    return query_id


async def test_paging_edits_the_message_in_place(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, presses: list[ButtonPress]
) -> None:
    fake.push_message(ALICE, "/tpages")
    [message] = await fake.wait_for_sent(ALICE)
    assert message.buttons == [[("Next ›", "tpage:2")]]

    await press(fake, message, "Next ›")
    await fake.wait_for(lambda: message.text == "Page 2 of 3")
    assert message.buttons == [[("‹ Prev", "tpage:1"), ("Next ›", "tpage:3")]]

    await press(fake, message, "Next ›")
    await fake.wait_for(lambda: message.text == "Page 3 of 3")

    assert message.edits == ["Page 1 of 3", "Page 2 of 3"]
    assert message.buttons == [[("‹ Prev", "tpage:2")]]
    assert len(fake.sent[ALICE]) == 1
    assert [(p.platform_user_id, p.chat_id, p.is_private) for p in presses] == [
        (str(ALICE), str(ALICE), True)
    ] * 2


async def test_an_action_then_undo(adapter: TelegramAdapter, fake: FakeTelegramAPI) -> None:
    fake.push_message(ALICE, "/tforget likes tea")
    [message] = await fake.wait_for_sent(ALICE)
    assert message.text == "Forgot: likes tea"

    await press(fake, message, "Undo")
    await fake.wait_for(lambda: message.text == "Restored m7.")

    assert message.buttons == []
    assert len(fake.sent[ALICE]) == 1


async def test_a_confirmation(adapter: TelegramAdapter, fake: FakeTelegramAPI) -> None:
    fake.push_message(ALICE, "/tforgetall")
    [message] = await fake.wait_for_sent(ALICE)
    assert [label for label, _ in message.buttons[0]] == ["Yes, forget everything", "Cancel"]

    await press(fake, message, "Yes, forget everything")
    await fake.wait_for(lambda: message.text == "Done — I've forgotten everything.")
    assert message.buttons == []


async def test_forged_data_is_answered_clearly_and_every_query_is_answered(
    adapter: TelegramAdapter, fake: FakeTelegramAPI, presses: list[ButtonPress]
) -> None:
    fake.push_message(ALICE, "/tpages")
    [message] = await fake.wait_for_sent(ALICE)

    forged = fake.push_callback(ALICE, "admin:drop-everything", message.message_id)
    await fake.wait_for(lambda: message.text == STALE_BUTTON)
    unknown_page = fake.push_callback(ALICE, "nonsense", message.message_id)
    await fake.wait_for(lambda: len(fake.callback_answers) == 2)

    assert [a["callback_query_id"] for a in fake.callback_answers] == [forged, unknown_page]
    assert message.buttons == []
    assert presses == []


async def test_a_press_on_a_message_telegram_no_longer_shows_gets_a_new_message(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    fake.start_chat(ALICE)
    fake.push_callback(ALICE, "tpage:2", message_id=999)

    [message] = await fake.wait_for_sent(ALICE)

    assert message.text == "Page 2 of 3"
    assert len(fake.callback_answers) == 1


async def test_a_document_is_sent_as_a_file(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    fake.push_message(ALICE, "/texport")

    text, upload = await fake.wait_for_sent(ALICE, 2)

    assert text.text == "Here is everything I keep about you."
    assert upload.method == "sendDocument"
    assert upload.document is not None
    assert upload.document.filename == "companion-export.json"
    assert json.loads(upload.document.content) == {"memories": ["likes tea"]}


async def test_buttons_with_over_long_data_are_left_out(
    adapter: TelegramAdapter, fake: FakeTelegramAPI
) -> None:
    fake.push_message(ALICE, "/todd")

    [message] = await fake.wait_for_sent(ALICE)

    assert message.text == "Some buttons"
    assert message.buttons == [[("Fine", "tpage:2")]]


async def test_the_rendering_is_the_same_from_the_delivery_port(
    core: Core, fake: FakeTelegramAPI
) -> None:
    fake.start_chat(ALICE)
    async with running(core, fake) as started:
        message_id = await started.delivery.send(
            Recipient(1, "telegram", str(ALICE), str(ALICE)), page(2)
        )
    [message] = fake.sent[ALICE]
    assert message_id == str(message.message_id)
    assert message.buttons == [[("‹ Prev", "tpage:1"), ("Next ›", "tpage:3")]]
