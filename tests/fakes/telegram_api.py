"""A loopback fake of the Telegram Bot API (`/bot<token>/<method>`) for driving the real
python-telegram-bot against it.

It answers like the real API (`{"ok": true, "result": ...}` or the error JSON with
`error_code`, `description` and `parameters.retry_after`), accepts JSON, form and
multipart bodies, keeps per-chat message ids, validates HTML parse mode and message
length, implements getUpdates offsets and long polling (or delivers to a webhook once
one is set), and records what the bot sent per chat. Tests push realistic updates with
`push_message`, `push_callback`, `push_edited`, `push_media`, `push_my_chat_member` and
script failures with `fail`, `block` and `forbid`.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

TOKEN = "123456789:AAFakeTokenForTestsOnly_abcdefghijklmno"
BOT_ID = 123456789
BOT_USERNAME = "companion_test_bot"
MAX_TEXT = 4096
MAX_CAPTION = 1024
BLOCKED = "Forbidden: bot was blocked by the user"
CANT_INITIATE = "Forbidden: bot can't initiate conversation with a user"
ALLOWED_TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a"}
    | {"tg-emoji", "code", "pre", "blockquote"}
)
ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
CHAT_ACTIONS = frozenset(
    {"typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice"}
    | {"upload_document", "choose_sticker", "find_location", "record_video_note"}
    | {"upload_video_note"}
)
JSON_FIELDS = frozenset(
    {"reply_markup", "entities", "caption_entities", "allowed_updates", "commands"}
    | {"reply_parameters", "link_preview_options", "scope"}
)
INT_FIELDS = frozenset(
    {"message_id", "offset", "limit", "timeout", "reply_to_message_id", "cache_time"}
    | {"max_connections"}
)
BOOL_FIELDS = frozenset(
    {"drop_pending_updates", "disable_notification", "show_alert", "protect_content"}
    | {"allow_sending_without_reply"}
)
_HTML_TOKEN = re.compile(
    r"<(?P<close>/?)(?P<tag>[A-Za-z][A-Za-z0-9-]*)(?P<attrs>[^<>]*)>"
    r"|&(?P<entity>#[0-9]+|#x[0-9A-Fa-f]+|[A-Za-z]+);"
    r"|(?P<bare>[<&])"
)
_MENTION = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{5,32}\b")
_COMMAND = re.compile(r"^/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{5,32})?")


class ApiError(Exception):
    """An error answer of the Bot API."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


def parse_html(text: str) -> str:
    """The text a person sees for an HTML-formatted message; `ApiError` like Telegram's."""
    visible: list[str] = []
    stack: list[str] = []
    position = 0
    for match in _HTML_TOKEN.finditer(text):
        visible.append(text[position : match.start()])
        position = match.end()
        offset = len(text[: match.start()].encode())
        if match["bare"]:
            what = "Unsupported start tag" if match["bare"] == "<" else "Character entity expected"
            raise _cant_parse(f"{what} at byte offset {offset}")
        if match["entity"]:
            visible.append(_entity(match["entity"], offset))
            continue
        tag = match["tag"].lower()
        if tag not in ALLOWED_TAGS:
            raise _cant_parse(f'Unsupported start tag "{tag}" at byte offset {offset}')
        if not match["close"]:
            stack.append(tag)
        elif not stack or stack[-1] != tag:
            expected = f'"</{stack[-1]}>"' if stack else "no end tag"
            raise _cant_parse(
                f'Unmatched end tag at byte offset {offset}, expected {expected}, found "</{tag}>"'
            )
        else:
            stack.pop()
    visible.append(text[position:])
    if stack:
        raise _cant_parse(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(visible)


def _entity(name: str, offset: int) -> str:
    if name.startswith("#x"):
        return chr(int(name[2:], 16))
    if name.startswith("#"):
        return chr(int(name[1:]))
    if name in ENTITIES:
        return ENTITIES[name]
    raise _cant_parse(f'Unsupported HTML entity "&{name};" at byte offset {offset}')


def _cant_parse(detail: str) -> ApiError:
    return ApiError(400, f"Bad Request: can't parse entities: {detail}")


def utf16_len(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def auto_entities(text: str) -> list[dict[str, Any]]:
    """The entities a Telegram client would attach: a leading bot_command and @mentions."""
    entities: list[dict[str, Any]] = []
    command = _COMMAND.match(text)
    if command:
        entities.append({"type": "bot_command", "offset": 0, "length": utf16_len(command[0])})
    for mention in _MENTION.finditer(text):
        if command and mention.start() < command.end():
            continue
        start = utf16_len(text[: mention.start()])
        entities.append({"type": "mention", "offset": start, "length": utf16_len(mention[0])})
    return entities


@dataclass
class SentDocument:
    """A file the bot uploaded."""

    filename: str
    content: bytes
    mime_type: str | None


@dataclass
class SentMessage:
    """Something the bot sent to a chat, as the person sees it now."""

    chat_id: int
    message_id: int
    method: str
    text: str
    raw: str
    parse_mode: str | None
    reply_markup: dict[str, Any] | None = None
    document: SentDocument | None = None
    reply_to: int | None = None
    edits: list[str] = field(default_factory=list)

    @property
    def buttons(self) -> list[list[tuple[str, str]]]:
        """The inline keyboard as rows of (label, callback_data)."""
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        return [[(b["text"], b.get("callback_data", "")) for b in row] for row in rows]

    def action(self, label: str) -> str:
        """The callback data of the button labelled `label`."""
        for row in self.buttons:
            for text, data in row:
                if text == label:
                    return data
        raise KeyError(label)


@dataclass
class ScriptedFailure:
    """Fail the next `times` calls of `method` (to `chat_id`, if given)."""

    method: str
    status: int
    description: str
    retry_after: int | None
    chat_id: int | None
    times: int


@dataclass
class GetUpdatesCall:
    """One getUpdates request and the ids it returned."""

    offset: int | None
    timeout: float
    returned: list[int]


class FakeTelegramAPI:
    """The Bot API on 127.0.0.1; pass `base_url` as TELEGRAM_API_BASE_URL."""

    def __init__(self, *, token: str = TOKEN, batch_limit: int = 100) -> None:
        self.token = token
        self.batch_limit = batch_limit
        self.bot_user = {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Companion",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.sent: dict[int, list[SentMessage]] = defaultdict(list)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.chat_actions: list[tuple[int, str]] = []
        self.callback_answers: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.get_updates_calls: list[GetUpdatesCall] = []
        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self.webhook_deliveries: list[int] = []
        self.webhook_attempts: list[tuple[int, int]] = []  # (update id, HTTP status or 0)
        self.confirmed_offset = 0
        self._pending: list[dict[str, Any]] = []
        self._update_ids = itertools.count(700_001)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._users: dict[int, dict[str, Any]] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._started: set[int] = set()
        self._forbidden: dict[int, str] = {}
        self._queries: dict[str, bool] = {}
        self._failures: list[ScriptedFailure] = []
        self.files: dict[str, bytes] = {}
        """Files people sent, by file id (getFile and the download route serve them)."""
        self.downloads: list[str] = []
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self._webhook_task: asyncio.Task[None] | None = None
        self._port = 0

    # Lifecycle

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, the Bot API root, once started."""
        if self._runner is None:
            raise RuntimeError("the fake Bot API is not running")
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> None:
        """Listen on a free loopback port."""
        app = web.Application(client_max_size=60 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(
            app, handle_signals=False, handler_cancellation=True, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]
        self._client = aiohttp.ClientSession()

    async def stop(self) -> None:
        """Stop webhook delivery and close the server."""
        await self._stop_webhook()
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeTelegramAPI:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # Scripting

    def fail(
        self,
        method: str,
        status: int = 400,
        description: str = "Bad Request: scripted failure",
        *,
        retry_after: int | None = None,
        chat_id: int | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` calls of `method` with this error."""
        self._failures.append(
            ScriptedFailure(method.lower(), status, description, retry_after, chat_id, times)
        )

    def block(self, chat_id: int) -> None:
        """The person blocked the bot: every send to their chat gets 403."""
        self._forbidden[chat_id] = BLOCKED

    def unblock(self, chat_id: int) -> None:
        """The person unblocked the bot."""
        self._forbidden.pop(chat_id, None)
        self._started.add(chat_id)

    def start_chat(self, user_id: int, first_name: str | None = None) -> None:
        """The person has opened a private chat with the bot (pressed Start)."""
        self._user(user_id, first_name)
        self._chats[user_id] = self._private_chat(user_id)
        self._started.add(user_id)

    # Pushing updates

    def push_message(
        self,
        user_id: int,
        text: str,
        *,
        chat_id: int | None = None,
        chat_type: str = "private",
        reply_to_bot: bool = False,
        reply_to: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        first_name: str | None = None,
    ) -> int:
        """A person sends a text message; returns its message id."""
        message = self._new_message(user_id, chat_id, chat_type, first_name)
        message["text"] = text
        found = auto_entities(text) if entities is None else entities
        if found:
            message["entities"] = found
        self._attach_reply(message, reply_to_bot=reply_to_bot, reply_to=reply_to)
        self._push({"message": message})
        return int(message["message_id"])

    def push_media(
        self,
        user_id: int,
        kind: str = "photo",
        *,
        caption: str | None = None,
        chat_id: int | None = None,
        chat_type: str = "private",
        reply_to_bot: bool = False,
    ) -> int:
        """A person sends a photo, sticker, voice, video, document or location."""
        message = self._new_message(user_id, chat_id, chat_type, None)
        message.update(_media(kind, message["message_id"]))
        if caption is not None:
            message["caption"] = caption
            found = auto_entities(caption)
            if found:
                message["caption_entities"] = found
        self._attach_reply(message, reply_to_bot=reply_to_bot, reply_to=None)
        self._push({"message": message})
        return int(message["message_id"])

    def push_document(
        self,
        user_id: int,
        filename: str,
        content: bytes,
        *,
        chat_id: int | None = None,
        chat_type: str = "private",
        reply_to_bot: bool = False,
        file_size: int | None = None,
    ) -> int:
        """A person sends a file as a document (getFile and the download serve it)."""
        message = self._new_message(user_id, chat_id, chat_type, None)
        file_id = f"doc-in-{message['message_id']}-{user_id}"
        self.files[file_id] = content
        message["document"] = {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_name": filename,
            "mime_type": "application/json",
            "file_size": len(content) if file_size is None else file_size,
        }
        self._attach_reply(message, reply_to_bot=reply_to_bot, reply_to=None)
        self._push({"message": message})
        return int(message["message_id"])

    def push_photo(self, user_id: int, caption: str | None = None, **options: Any) -> int:
        """A person sends a photo (with an optional caption)."""
        return self.push_media(user_id, "photo", caption=caption, **options)

    def push_edited(
        self, user_id: int, message_id: int, text: str, *, chat_id: int | None = None
    ) -> None:
        """A person edits a text message they sent earlier."""
        chat = chat_id if chat_id is not None else user_id
        original = self._messages[(chat, message_id)]
        edited = {**original, "text": text, "edit_date": original["date"] + 5}
        edited.pop("entities", None)
        found = auto_entities(text)
        if found:
            edited["entities"] = found
        self._messages[(chat, message_id)] = edited
        self._push({"edited_message": edited})

    def push_callback(
        self, user_id: int, data: str, message_id: int, *, chat_id: int | None = None
    ) -> str:
        """A person presses an inline button under message `message_id`; returns the query id."""
        chat = chat_id if chat_id is not None else user_id
        query_id = f"{user_id}{next(self._update_ids)}"
        self._queries[query_id] = False
        stored = self._messages.get((chat, message_id))
        message = stored or {"chat": self._chats[chat], "message_id": message_id, "date": 0}
        self._push(
            {
                "callback_query": {
                    "id": query_id,
                    "from": self._user(user_id),
                    "message": message,
                    "chat_instance": f"ci{chat}",
                    "data": data,
                }
            }
        )
        return query_id

    def push_my_chat_member(self, user_id: int, status: str, *, old_status: str = "member") -> None:
        """The person blocks ('kicked') or restarts ('member') the bot in their private chat."""
        self.start_chat(user_id)
        if status == "kicked":
            self._forbidden[user_id] = BLOCKED
        else:
            self._forbidden.pop(user_id, None)
        self._push(
            {
                "my_chat_member": {
                    "chat": self._chats[user_id],
                    "from": self._user(user_id),
                    "date": int(time.time()),
                    "old_chat_member": _member(self.bot_user, old_status),
                    "new_chat_member": _member(self.bot_user, status),
                }
            }
        )

    def push_raw(self, update: dict[str, Any]) -> int:
        """Any update body, as given (e.g. one of a shape the library cannot read); returns
        its update id."""
        self._push(update)
        return int(self._pending[-1]["update_id"])

    @property
    def pending_updates(self) -> list[int]:
        """Ids of updates not yet confirmed by the bot."""
        return [u["update_id"] for u in self._pending]

    # Waiting

    async def wait_for(self, predicate: Callable[[], bool], within: float = 3.0) -> None:
        """Wait until `predicate()` holds (checked whenever the fake's state changes)."""
        async with asyncio.timeout(within):
            while not predicate():
                await self._changed.wait()

    async def wait_for_sent(
        self, chat_id: int, count: int = 1, within: float = 3.0
    ) -> list[SentMessage]:
        """The messages sent to `chat_id`, once there are at least `count`."""
        await self.wait_for(lambda: len(self.sent[chat_id]) >= count, within)
        return self.sent[chat_id]

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        """The parameters of every call of `method`."""
        return [params for name, params in self.calls if name.lower() == method.lower()]

    def set_language(self, user_id: int, code: str | None) -> None:
        """The language Telegram reports for a user (their app's), from now on."""
        self._user(user_id)["language_code"] = code

    # Building updates

    def _user(self, user_id: int, first_name: str | None = None) -> dict[str, Any]:
        if user_id not in self._users or first_name:
            name = first_name or f"User{user_id}"
            self._users[user_id] = {
                "id": user_id,
                "is_bot": False,
                "first_name": name,
                "username": f"{name.lower()}_{user_id}",
                "language_code": "en",
            }
        return self._users[user_id]

    def _private_chat(self, user_id: int) -> dict[str, Any]:
        user = self._users[user_id]
        return {
            "id": user_id,
            "type": "private",
            "first_name": user["first_name"],
            "username": user["username"],
        }

    def _new_message(
        self, user_id: int, chat_id: int | None, chat_type: str, first_name: str | None
    ) -> dict[str, Any]:
        user = self._user(user_id, first_name)
        if chat_type == "private":
            self.start_chat(user_id)
            chat = self._chats[user_id]
        else:
            assert chat_id is not None and chat_id < 0, "group chats have negative ids"
            chat = self._chats.setdefault(
                chat_id, {"id": chat_id, "type": chat_type, "title": f"Group {-chat_id}"}
            )
        message_id = self._next_message_id(chat["id"])
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": user,
            "chat": chat,
            "date": int(time.time()),
        }
        self._messages[(chat["id"], message_id)] = message
        return message

    def _attach_reply(
        self, message: dict[str, Any], *, reply_to_bot: bool, reply_to: int | None
    ) -> None:
        chat_id = message["chat"]["id"]
        if reply_to is not None:
            message["reply_to_message"] = self._messages[(chat_id, reply_to)]
        elif reply_to_bot:
            ours = self.sent[chat_id]
            if ours:
                message["reply_to_message"] = self._messages[(chat_id, ours[-1].message_id)]
            else:
                message["reply_to_message"] = self._bot_message(chat_id, "Earlier message")

    def _bot_message(self, chat_id: int, text: str) -> dict[str, Any]:
        message_id = self._next_message_id(chat_id)
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": self.bot_user,
            "chat": self._chats[chat_id],
            "date": int(time.time()),
            "text": text,
        }
        self._messages[(chat_id, message_id)] = message
        return message

    def _next_message_id(self, chat_id: int) -> int:
        return next(self._message_ids.setdefault(chat_id, itertools.count(1)))

    def _push(self, update: dict[str, Any]) -> None:
        self._pending.append({"update_id": next(self._update_ids), **update})
        self._notify()

    def _notify(self) -> None:
        """Wake everything waiting for a change of state."""
        self._changed.set()
        self._changed = asyncio.Event()

    # HTTP

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error_response(ApiError(401, "Unauthorized"))
        method = request.match_info["method"]
        params = await _params(request)
        self.calls.append((method, params))
        handler = getattr(self, f"_api_{method.lower()}", None)
        try:
            if handler is None:
                raise ApiError(404, "Not Found")
            self._scripted_failure(method, params)
            result = await handler(params)
        except ApiError as exc:
            return _error_response(exc)
        finally:
            self._notify()
        return web.json_response({"ok": True, "result": result})

    def _scripted_failure(self, method: str, params: dict[str, Any]) -> None:
        for failure in self._failures:
            if failure.method != method.lower() or failure.times <= 0:
                continue
            if failure.chat_id is not None and params.get("chat_id") != failure.chat_id:
                continue
            failure.times -= 1
            raise ApiError(failure.status, failure.description, failure.retry_after)

    # Methods: identity and updates

    async def _api_getfile(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id", ""))
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(self.files[file_id]),
            "file_path": f"documents/{file_id}",
        }

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        file_id = request.match_info["path"].removeprefix("documents/")
        if file_id not in self.files:
            return web.Response(status=404)
        self.downloads.append(file_id)
        return web.Response(body=self.files[file_id])

    async def _api_getme(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.bot_user

    async def _api_getupdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = params.get("offset")
        self._confirm(offset)
        allowed = params.get("allowed_updates") or None
        timeout = float(params.get("timeout") or 0)
        call = GetUpdatesCall(offset, timeout, [])
        self.get_updates_calls.append(call)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not any(_allowed(u, allowed) for u in self._pending) and loop.time() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), deadline - loop.time())
        updates = [u for u in self._pending if _allowed(u, allowed)][: self.batch_limit]
        call.returned = [u["update_id"] for u in updates]
        return updates

    def _confirm(self, offset: int | None) -> None:
        if offset is None or offset <= 0:
            return
        self.confirmed_offset = max(self.confirmed_offset, offset)
        self._pending = [u for u in self._pending if u["update_id"] >= offset]
        self._notify()

    async def _api_deletewebhook(self, params: dict[str, Any]) -> bool:
        await self._stop_webhook()
        self.webhook_url = ""
        self.webhook_secret = None
        if params.get("drop_pending_updates"):
            self._pending.clear()
        return True

    async def _api_setwebhook(self, params: dict[str, Any]) -> bool:
        url = str(params.get("url") or "")
        if not url.startswith(("http://", "https://")):
            raise ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided")
        if params.get("drop_pending_updates"):
            self._pending.clear()
        await self._stop_webhook()
        self.webhook_url = url
        self.webhook_secret = params.get("secret_token")
        self._webhook_task = asyncio.create_task(self._deliver_to_webhook())
        return True

    async def _api_getwebhookinfo(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._pending),
        }

    async def _api_setmycommands(self, params: dict[str, Any]) -> bool:
        commands = params.get("commands") or []
        for command in commands:
            if not re.fullmatch(r"[a-z0-9_]{1,32}", command.get("command", "")):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(command.get("description", "")) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands = list(commands)
        return True

    # Methods: sending

    async def _api_sendmessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._check_chat(params)
        raw = str(params.get("text") or "")
        visible = self._visible(raw, params.get("parse_mode"))
        if not visible.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(visible) > MAX_TEXT:
            raise ApiError(400, "Bad Request: message is too long")
        markup = _check_markup(params.get("reply_markup"), chat_id)
        sent = SentMessage(
            chat_id=chat_id,
            message_id=self._next_message_id(chat_id),
            method="sendMessage",
            text=visible,
            raw=raw,
            parse_mode=params.get("parse_mode"),
            reply_markup=markup,
            reply_to=self._reply_target(chat_id, params),
        )
        return self._record_sent(sent, {"text": visible})

    async def _api_senddocument(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._check_chat(params)
        upload = params.get("document")
        if isinstance(upload, str) and upload.startswith("attach://"):
            upload = params.get(upload.removeprefix("attach://"))
        if not isinstance(upload, SentDocument):
            raise ApiError(400, "Bad Request: there is no document in the request")
        caption = str(params.get("caption") or "")
        visible = self._visible(caption, params.get("parse_mode")) if caption else ""
        if utf16_len(visible) > MAX_CAPTION:
            raise ApiError(400, "Bad Request: message caption is too long")
        sent = SentMessage(
            chat_id=chat_id,
            message_id=self._next_message_id(chat_id),
            method="sendDocument",
            text=visible,
            raw=caption,
            parse_mode=params.get("parse_mode"),
            reply_markup=_check_markup(params.get("reply_markup"), chat_id),
            document=upload,
            reply_to=self._reply_target(chat_id, params),
        )
        document = {
            "file_id": f"doc{sent.message_id}",
            "file_unique_id": f"udoc{sent.message_id}",
            "file_name": upload.filename,
            "mime_type": upload.mime_type or "application/octet-stream",
            "file_size": len(upload.content),
        }
        extra: dict[str, Any] = {"document": document}
        if visible:
            extra["caption"] = visible
        return self._record_sent(sent, extra)

    async def _api_sendchataction(self, params: dict[str, Any]) -> bool:
        chat_id = self._check_chat(params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        self.chat_actions.append((chat_id, str(action)))
        return True

    async def _api_editmessagetext(self, params: dict[str, Any]) -> dict[str, Any]:
        sent, message = self._editable(params)
        raw = str(params.get("text") or "")
        visible = self._visible(raw, params.get("parse_mode"))
        if not visible.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(visible) > MAX_TEXT:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        if sent.document is not None:
            raise ApiError(400, "Bad Request: there is no text in the message to edit")
        markup = _check_markup(params.get("reply_markup"), sent.chat_id)
        if visible == sent.text and markup == sent.reply_markup:
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        sent.edits.append(sent.text)
        sent.text, sent.raw, sent.parse_mode = visible, raw, params.get("parse_mode")
        sent.reply_markup = markup
        return self._refresh(sent, message, {"text": visible})

    async def _api_editmessagereplymarkup(self, params: dict[str, Any]) -> dict[str, Any]:
        sent, message = self._editable(params)
        markup = _check_markup(params.get("reply_markup"), sent.chat_id)
        if markup == sent.reply_markup:
            raise ApiError(400, "Bad Request: message is not modified")
        sent.reply_markup = markup
        return self._refresh(sent, message, {})

    async def _api_answercallbackquery(self, params: dict[str, Any]) -> bool:
        query_id = str(params.get("callback_query_id") or "")
        if self._queries.get(query_id, True):
            raise ApiError(
                400,
                "Bad Request: query is too old and response timeout expired or query id is invalid",
            )
        self._queries[query_id] = True
        self.callback_answers.append(params)
        return True

    # Sending helpers

    def _check_chat(self, params: dict[str, Any]) -> int:
        try:
            chat_id = int(params["chat_id"])
        except (KeyError, TypeError, ValueError):
            raise ApiError(400, "Bad Request: chat not found") from None
        if chat_id in self._forbidden:
            raise ApiError(403, self._forbidden[chat_id])
        if chat_id > 0 and chat_id not in self._started:
            raise ApiError(403, CANT_INITIATE)
        if chat_id not in self._chats:
            raise ApiError(400, "Bad Request: chat not found")
        return chat_id

    def _visible(self, raw: str, parse_mode: object) -> str:
        if parse_mode is None or parse_mode == "":
            return raw
        if str(parse_mode).upper() != "HTML":
            raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode}")
        return parse_html(raw)

    def _reply_target(self, chat_id: int, params: dict[str, Any]) -> int | None:
        reply = params.get("reply_parameters") or {}
        target = reply.get("message_id") or params.get("reply_to_message_id")
        if target is None:
            return None
        if (chat_id, int(target)) not in self._messages and not reply.get(
            "allow_sending_without_reply"
        ):
            raise ApiError(400, "Bad Request: message to be replied not found")
        return int(target)

    def _record_sent(self, sent: SentMessage, extra: dict[str, Any]) -> dict[str, Any]:
        message = {
            "message_id": sent.message_id,
            "from": self.bot_user,
            "chat": self._chats[sent.chat_id],
            "date": int(time.time()),
            **extra,
        }
        if sent.reply_markup:
            message["reply_markup"] = sent.reply_markup
        self._messages[(sent.chat_id, sent.message_id)] = message
        self.sent[sent.chat_id].append(sent)
        return message

    def _editable(self, params: dict[str, Any]) -> tuple[SentMessage, dict[str, Any]]:
        chat_id = self._check_chat(params)
        message_id = params.get("message_id")
        for sent in self.sent[chat_id]:
            if sent.message_id == message_id:
                return sent, self._messages[(chat_id, sent.message_id)]
        raise ApiError(400, "Bad Request: message to edit not found")

    def _refresh(
        self, sent: SentMessage, message: dict[str, Any], extra: dict[str, Any]
    ) -> dict[str, Any]:
        message = {**message, **extra, "edit_date": int(time.time())}
        message.pop("reply_markup", None)
        if sent.reply_markup:
            message["reply_markup"] = sent.reply_markup
        self._messages[(sent.chat_id, sent.message_id)] = message
        return message

    # Webhook

    async def _deliver_to_webhook(self) -> None:
        assert self._client is not None
        headers = {"Content-Type": "application/json"}
        if self.webhook_secret:
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.webhook_secret
        while True:
            while not self._pending:
                await self._changed.wait()
            update = self._pending[0]
            try:
                async with self._client.post(
                    self.webhook_url, data=json.dumps(update), headers=headers
                ) as response:
                    status = response.status
            except aiohttp.ClientError:
                status = 0
            self.webhook_attempts.append((update["update_id"], status))
            if status == 200:
                self._pending.remove(update)
                self.webhook_deliveries.append(update["update_id"])
            self._notify()
            if status != 200:
                await asyncio.sleep(0.05)

    async def _stop_webhook(self) -> None:
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._webhook_task
            self._webhook_task = None


async def _params(request: web.Request) -> dict[str, Any]:
    """The call's parameters from the query string and a JSON, form or multipart body."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json()
        params.update(body if isinstance(body, dict) else {})
        return params
    if request.body_exists:
        form = await request.post()
        for key, value in form.items():
            if isinstance(value, web.FileField):
                params[key] = SentDocument(
                    value.filename, value.file.read(), value.content_type or None
                )
            else:
                params[key] = _decode_field(key, str(value))
    return params


def _decode_field(key: str, value: str) -> Any:
    if key in JSON_FIELDS:
        return json.loads(value)
    if key in INT_FIELDS or key == "chat_id":
        with contextlib.suppress(ValueError):
            return int(float(value))
        return value
    if key in BOOL_FIELDS:
        return value.lower() == "true"
    return value


def _check_markup(markup: Any, chat_id: int) -> dict[str, Any] | None:
    if not markup:
        return None
    for row in markup.get("inline_keyboard", []):
        for button in row:
            if not button.get("text"):
                raise ApiError(
                    400, "Bad Request: text buttons are unallowed in the inline keyboard"
                )
            kinds = [k for k in ("callback_data", "url", "web_app") if k in button]
            if len(kinds) != 1:
                raise ApiError(400, "Bad Request: can't parse inline keyboard button")
            if "web_app" in button:  # Mini Apps: HTTPS only, and only in private chats
                if chat_id < 0:
                    raise ApiError(400, "Bad Request: BUTTON_TYPE_INVALID")
                if not str(button["web_app"].get("url", "")).startswith("https://"):
                    raise ApiError(400, "Bad Request: BUTTON_URL_INVALID")
            data = button.get("callback_data")
            if data is not None and not 1 <= len(data.encode()) <= 64:
                raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
    return dict(markup)


def _allowed(update: dict[str, Any], allowed: list[str] | None) -> bool:
    if not allowed:
        return "chat_member" not in update
    return any(kind in update for kind in allowed)


def _member(user: dict[str, Any], status: str) -> dict[str, Any]:
    member: dict[str, Any] = {"user": user, "status": status}
    if status == "kicked":
        member["until_date"] = 0
    return member


def _media(kind: str, message_id: int) -> dict[str, Any]:
    file = {"file_id": f"{kind}{message_id}", "file_unique_id": f"u{kind}{message_id}"}
    shapes: dict[str, dict[str, Any]] = {
        "photo": {"photo": [{**file, "width": 90, "height": 90, "file_size": 1024}]},
        "sticker": {
            "sticker": {
                **file,
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
                "emoji": "👍",
            }
        },
        "voice": {"voice": {**file, "duration": 3, "mime_type": "audio/ogg"}},
        "video": {"video": {**file, "width": 640, "height": 360, "duration": 5}},
        "document": {"document": {**file, "file_name": "notes.pdf"}},
        "location": {"location": {"latitude": 55.676, "longitude": 12.568}},
    }
    return shapes[kind]


def _error_response(error: ApiError) -> web.Response:
    body: dict[str, Any] = {
        "ok": False,
        "error_code": error.status,
        "description": error.description,
    }
    if error.retry_after is not None:
        body["parameters"] = {"retry_after": error.retry_after}
    return web.json_response(body, status=error.status)


def escape(text: str) -> str:
    """Telegram's HTML escaping (for tests that build expected raw text)."""
    return html.escape(text, quote=False)
