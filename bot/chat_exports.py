"""Reading a chat export a person brings: which format it is, and its messages one at a
time, streamed (a file is never loaded whole, so memory stays flat in its size).

Formats: Telegram Desktop's single-chat `result.json`, ChatGPT's `conversations.json`,
DiscordChatExporter's JSON, and plain text with one message per line (gzip of any of
them too). Anything else, a file over the cap (counted as it is read, unpacked), a
truncated file or an encoding mess raises `ExportRejected` with a message for the person.
No SQL here: the caller stores what this yields.
"""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import ijson

from bot.errors import InvalidInput
from bot.export_formats import (
    ExportedMessage,
    chatgpt_messages,
    discord_message,
    telegram_message,
)

_GZIP = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_BINARY = (b"\x89PNG", b"%PDF", b"PK\x03\x04", b"\xff\xd8\xff", b"GIF8", b"\x00")
SNIFF_BYTES = 4096
MAX_LINE_CHARS = 8000

MESSAGES = {
    "not_export": (
        "I couldn't read that file as a chat export. I can import Telegram Desktop's "
        "result.json (one chat, JSON format), ChatGPT's conversations.json, a "
        "DiscordChatExporter JSON file, or plain text with one message per line."
    ),
    "too_large": (
        "That file is too large for me to import ({limit} at most). Export a shorter "
        "stretch (a date range), or ask whoever runs me to import it from the command line."
    ),
    "truncated": (
        "That file ends in the middle (it looks cut off, perhaps the download or export "
        "didn't finish). Nothing was imported; please export it again and send the whole file."
    ),
    "encoding": (
        "That file has characters I can't read (it isn't valid UTF-8 text). Nothing was "
        "imported; exporting it again as JSON usually fixes this."
    ),
    "all_chats": (
        "That's an export of your whole Telegram account. Please export just one chat "
        "(in the chat: ⋮ → Export chat history, format JSON) and send me its result.json."
    ),
    "empty": "I found no messages with text in that file, so there is nothing to import.",
}


IMPORTABLE_SUFFIXES = (".json", ".txt", ".gz")
"""Files offered for import by their name; any other file (a photo, a PDF) is not read."""


def looks_importable(filename: str) -> bool:
    """Whether a sent file is named like a chat export (its content decides later)."""
    return filename.lower().endswith(IMPORTABLE_SUFFIXES)


class ExportRejected(InvalidInput):
    """The file cannot be imported; `reason` is one of `MESSAGES`, the text is for the person."""

    def __init__(self, reason: str, **values: str) -> None:
        super().__init__(MESSAGES[reason].format(**values))
        self.reason = reason


@dataclass
class ExportInfo:
    """What a reader learned about the export as a whole (filled in while streaming)."""

    source: str = ""
    chat_type: str | None = None


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Capped:
    """A binary stream that raises `too_large` once more than `limit` bytes were read."""

    def __init__(self, raw: _Readable, limit: int) -> None:
        self._raw = raw
        self._limit = limit
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self._raw.read(size)
        self.count += len(chunk)
        if self.count > self._limit:
            raise ExportRejected("too_large", limit=_megabytes(self._limit))
        return chunk


def _megabytes(count: int) -> str:
    return f"{count / 1_000_000:.0f} MB"


class ExportReader:
    """One export file, opened for streaming; `messages()` yields its messages in order."""

    def __init__(self, path: Path, *, max_bytes: int, zone: ZoneInfo) -> None:
        self.path = path
        self.info = ExportInfo()
        self._max_bytes = max_bytes
        self._zone = zone
        if path.stat().st_size > max_bytes:
            raise ExportRejected("too_large", limit=_megabytes(max_bytes))

    def messages(self) -> Generator[ExportedMessage]:
        """Every message with text, oldest first within each conversation."""
        with self.path.open("rb") as raw:
            head = raw.read(2)
            raw.seek(0)
            with (
                gzip.GzipFile(fileobj=raw)
                if head == _GZIP
                else contextlib.nullcontext(raw) as opened
            ):
                try:
                    yield from self._dispatch(_Capped(opened, self._max_bytes))
                except (gzip.BadGzipFile, EOFError) as exc:
                    raise ExportRejected("truncated") from exc

    def _dispatch(self, stream: _Capped) -> Iterator[ExportedMessage]:
        start = stream.read(SNIFF_BYTES)
        start = start.removeprefix(_BOM)
        first = start.lstrip()[:1]
        if any(start.startswith(magic) for magic in _BINARY) or b"\x00" in start:
            raise ExportRejected("not_export")
        rest = _Rejoined(start, stream)
        if first in (b"{", b"["):
            yield from self._json(rest, first == b"[")
        else:
            self.info.source = "text"
            yield from _lines(rest)

    def _json(self, stream: _Rejoined, is_list: bool) -> Iterator[ExportedMessage]:
        events = ijson.parse(stream, use_float=True)
        try:
            if is_list:
                self.info.source = "chatgpt"
                for conversation in _items(events, "item"):
                    yield from chatgpt_messages(conversation)
            else:
                yield from self._object(events)
        except ijson.JSONError as exc:
            raise _json_failure(exc) from exc

    def _object(self, events: Iterator[tuple[str, str, Any]]) -> Iterator[ExportedMessage]:
        """A Telegram or Discord export: top-level keys decide which, once `messages`
        starts (both write their header before the messages)."""
        keys: set[str] = set()
        for prefix, event, value in events:
            if prefix == "" and event == "map_key":
                keys.add(value)
            elif prefix == "type" and event == "string":
                self.info.chat_type = value
            elif prefix == "chats" or prefix == "participants":
                raise ExportRejected("all_chats" if prefix == "chats" else "not_export")
            elif prefix == "messages" and event == "start_array":
                yield from self._messages(keys, events)
                return
        raise ExportRejected("not_export")

    def _messages(
        self, keys: set[str], events: Iterator[tuple[str, str, Any]]
    ) -> Iterator[ExportedMessage]:
        if "guild" in keys or "channel" in keys:
            self.info.source = "discord"
            self.info.chat_type = "discord_dm" if "guild" not in keys else "discord_guild"
            for item in _items(events, "messages.item"):
                found = discord_message(item)
                if found is not None:
                    yield found
        elif "name" in keys or "type" in keys or "id" in keys:
            self.info.source = "telegram"
            for item in _items(events, "messages.item"):
                found = telegram_message(item, self._zone)
                if found is not None:
                    yield found
        else:
            raise ExportRejected("not_export")


class _Rejoined:
    """The sniffed first bytes put back in front of the rest of the stream."""

    def __init__(self, start: bytes, rest: _Capped) -> None:
        self._start = start
        self._rest = rest

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson asks for nothing to learn whether the stream is binary
            return b""
        if self._start:
            chunk, self._start = self._start, b""
            return chunk
        return self._rest.read(size)


def _items(events: Iterator[tuple[str, str, Any]], prefix: str) -> Iterator[Any]:
    """Build each object at `prefix` (an array's items) from the event stream, one at a
    time; the array's end stops the iteration once the rest of the file is read."""
    array = prefix.rsplit(".", 1)[0] if "." in prefix else ""
    for current, event, value in events:
        if current == prefix and event in ("start_map", "start_array"):
            builder = ijson.ObjectBuilder()
            builder.event(event, value)
            depth = 1
            for _, inner_event, inner_value in events:
                builder.event(inner_event, inner_value)
                if inner_event in ("start_map", "start_array"):
                    depth += 1
                elif inner_event in ("end_map", "end_array"):
                    depth -= 1
                    if depth == 0:
                        break
            yield builder.value
        elif current == array and event == "end_array":
            for _ in events:  # read to the end, so a truncated tail is still noticed
                pass
            return


def _json_failure(exc: Exception) -> ExportRejected:
    """What a streaming parse error means for the person."""
    text = str(exc)
    if "UTF8" in text or "utf-8" in text.lower():
        return ExportRejected("encoding")
    if "premature EOF" in text:
        return ExportRejected("truncated")
    return ExportRejected("not_export")


def _lines(stream: _Rejoined) -> Iterator[ExportedMessage]:
    """Plain text: each non-empty line is one of the person's own messages (no dates)."""
    pending = b""
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            found = _line(line)
            if found is not None:
                yield found
    found = _line(pending)
    if found is not None:
        yield found


def _line(raw: bytes) -> ExportedMessage | None:
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise ExportRejected("encoding") from exc
    if not text:
        return None
    return ExportedMessage(author=SELF_IN_TEXT, text=text[:MAX_LINE_CHARS], sent_at=None)


SELF_IN_TEXT = "me"
"""The one author of a plain-text file: the person themselves."""
