"""Reading chat exports, streamed: each format's real shape, and every bad file refused
with its reason (the integration tests check nothing is stored)."""

from __future__ import annotations

import gzip
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.chat_exports import ExportReader, ExportRejected
from bot.export_formats import ExportedMessage

DATA = Path(__file__).parents[1] / "data" / "imports"
UTC_ZONE = ZoneInfo("UTC")


def read(path: Path, max_bytes: int = 1_000_000) -> tuple[ExportReader, list[ExportedMessage]]:
    reader = ExportReader(path, max_bytes=max_bytes, zone=UTC_ZONE)
    return reader, list(reader.messages())


def test_telegram_text_entities_dates_and_skips() -> None:
    reader, messages = read(DATA / "telegram_result.json")
    assert (reader.info.source, reader.info.chat_type) == ("telegram", "personal_chat")
    assert [m.author for m in messages] == ["Ana Lima", "Sam Rivers", "Ana Lima", "Sam Rivers"]
    assert messages[1].text == "I started working at Crumb & Co bakery in Lisbon, I love it"
    assert messages[1].author_id == "user111000111"
    assert messages[2].sent_at is not None and messages[2].sent_at.hour == 9  # `date` only


def test_chatgpt_follows_the_visible_branch_only() -> None:
    reader, messages = read(DATA / "chatgpt_conversations.json")
    assert reader.info.source == "chatgpt"
    assert [(m.author, m.text) for m in messages] == [
        ("You", "I run a marathon in Berlin in September"),
        ("ChatGPT", "Great! You are a vegan athlete, so plan your protein."),
        ("You", "My knee hurts after long runs"),
    ]
    assert {m.conversation for m in messages} == {"c-marathon"}


def test_discord_keeps_text_messages_with_their_offsets() -> None:
    reader, messages = read(DATA / "discord_dm.json")
    assert reader.info.source == "discord"
    assert [(m.author, m.author_id) for m in messages] == [("Rowan", "333"), ("Kit", "444")]
    assert messages[1].sent_at is not None and messages[1].sent_at.utcoffset() is not None


def test_plain_text_is_one_message_per_non_empty_line() -> None:
    reader, messages = read(DATA / "notes.txt")
    assert reader.info.source == "text"
    assert [m.text for m in messages][1] == "I am learning the cello since January"
    assert len(messages) == 3 and all(m.sent_at is None for m in messages)


def test_gzip_is_read_and_capped_once_unpacked(tmp_path: Path) -> None:
    packed = tmp_path / "result.json.gz"
    packed.write_bytes(gzip.compress((DATA / "telegram_result.json").read_bytes()))
    assert len(read(packed)[1]) == 4
    with pytest.raises(ExportRejected) as caught:
        read(packed, max_bytes=1000)
    assert caught.value.reason == "too_large"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR", "not_export"),
        (b'\xef\xbb\xbf{"participants": [{"name": "A"}], "messages": []}', "not_export"),
        (b'{"something": "else"}', "not_export"),
        (b"", "empty"),
    ],
)
def test_files_that_are_not_exports(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "result.json"
    path.write_bytes(content)
    try:
        _, messages = read(path)
    except ExportRejected as exc:
        assert exc.reason == reason
    else:
        assert reason == "empty" and messages == []


def test_truncated_and_broken_encoding(tmp_path: Path) -> None:
    whole = (DATA / "telegram_result.json").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    with pytest.raises(ExportRejected) as caught:
        read(cut)
    assert caught.value.reason == "truncated"
    broken = tmp_path / "broken.json"
    broken.write_bytes(whole.replace(b"Lisbon", b"Lisb\xc3\x28n"))
    with pytest.raises(ExportRejected) as caught:
        read(broken)
    assert caught.value.reason == "encoding"
    text = tmp_path / "notes.txt"
    text.write_bytes(b"fine line\nCaf\xe9 au lait\n")
    with pytest.raises(ExportRejected) as caught:
        read(text)
    assert caught.value.reason == "encoding"


def test_whole_account_export_asks_for_one_chat() -> None:
    with pytest.raises(ExportRejected) as caught:
        read(DATA / "all_chats_result.json")
    assert caught.value.reason == "all_chats"
    assert "one chat" in str(caught.value)


def test_too_large_before_reading(tmp_path: Path) -> None:
    with pytest.raises(ExportRejected) as caught:
        ExportReader(DATA / "telegram_result.json", max_bytes=100, zone=UTC_ZONE)
    assert caught.value.reason == "too_large"
