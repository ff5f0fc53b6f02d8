"""A loopback fake of Discord (REST API v10 and the gateway) for the real discord.py client.

REST answers with exactly `Content-Type: application/json` and rate-limit headers,
validates message length (the real 400 Invalid Form Body), and can be scripted to
answer 429 (honoured by discord.py, then the send succeeds) or 403 50007 (DMs closed).
Interaction callbacks are as strict as Discord's: an unknown interaction or token is 404
10062, a second response to one interaction is 400 40060 (both kept in `rejected`), and
followups or edits with an unknown token are 404 10015.
Everything the bot sends is recorded: channel messages, interaction callbacks,
followups, edits and deletions (with their flags; ephemeral = 64), typing, command
syncs; `wait_for` waits for any of it. Test helpers dispatch gateway events: DMs and
their edits, server messages (blank unless they mention the bot, as without the
message content intent), slash commands and button presses in a server or a DM;
`drop_connection` closes the socket to exercise RESUME and replay.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, TypeVar

from aiohttp import web

from tests.fakes.discord_gateway import (
    FakeGateway,
    GatewaySession,
    Payload,
    member_payload,
    message_payload,
    user_payload,
)

T = TypeVar("T")
BOT_ID = 900_000_000_000_000_001
APP_ID = 900_000_000_000_000_002
GUILD_ID = 900_000_000_000_000_003
GUILD_CHANNEL_ID = 900_000_000_000_000_004
TOKEN = "fake-bot-token"
EPHEMERAL = 64
MAX_CONTENT = 2000
DISCORD_EPOCH_MS = 1_420_070_400_000


def json_response(
    body: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A response with exactly `application/json` (discord.py checks the header verbatim)."""
    return web.Response(
        status=status,
        body=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Via": "1.1 google",
            "X-RateLimit-Limit": "50",
            "X-RateLimit-Remaining": "49",
            "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
            "X-RateLimit-Reset-After": "1.000",
            "X-RateLimit-Bucket": "fakebucket",
            **(headers or {}),
        },
    )


@dataclass
class SentMessage:
    """A message the bot created (in a channel or as an interaction response)."""

    id: int
    channel_id: int
    content: str
    components: list[Payload] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    flags: int = 0
    reference: int | None = None

    @property
    def custom_ids(self) -> list[str]:
        return [c["custom_id"] for row in self.components for c in row.get("components", [])]

    @property
    def ephemeral_flag(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    @property
    def labels(self) -> list[str]:
        return [c["label"] for row in self.components for c in row.get("components", [])]


@dataclass
class InteractionReply:
    """One answer to an interaction: 'callback' (with its type), 'followup' or 'edit'."""

    interaction_id: int
    kind: str
    type: int | None
    flags: int
    message: SentMessage | None

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)


class FakeDiscord:
    """The fake Discord; use `async with FakeDiscord() as fake:`."""

    def __init__(self, *, heartbeat_ms: int = 500) -> None:
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self.gateway = FakeGateway(
            ready=self._ready, guilds=self._guilds, notify=self._notify, heartbeat_ms=heartbeat_ms
        )
        self.bot = user_payload(BOT_ID, "companion", bot=True)
        self.messages: list[SentMessage] = []
        self.interaction_replies: list[InteractionReply] = []
        self.interactions: dict[str, int] = {}  # token -> interaction id
        self.typing: list[int] = []
        self.requests: list[tuple[str, str]] = []
        self.synced_commands: list[list[Payload]] = []
        self.dm_channels: dict[int, int] = {}  # user id -> channel id
        self.closed_dms: set[int] = set()
        self.rate_limit_sends = 0
        self.recommended_shards = 1  # what GET /gateway/bot recommends
        self.fail_sends: list[tuple[int, Payload]] = []
        self._pressed: dict[str, SentMessage] = {}  # interaction token -> the pressed message
        self._acknowledged: set[str] = set()  # tokens whose interaction got its one response
        self.rejected: list[tuple[int, int]] = []  # (interaction id, error code) refused
        self.rate_limited = 0
        self.uploads: dict[str, bytes] = {}  # attachment id -> the file a person sent
        self.downloads: list[str] = []
        self.edits: list[tuple[int, str]] = []  # (message id, new content) by PATCH
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    # lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application()
        app.router.add_get("/gateway", self.gateway.handle)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        app.router.add_get("/attachments/{id}/{name}", self._attachment)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        site = web.SockSite(self._runner, sock)
        await site.start()
        port = sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"
        self.gateway.url = f"ws://127.0.0.1:{port}/gateway"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.gateway.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base_url(self) -> str:
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return self.gateway.url

    def snowflake(self) -> int:
        """A fresh, time-ordered id."""
        return ((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | (next(self._ids) & 0x3FFFFF)

    # waiting -------------------------------------------------------------------------

    def _notify(self) -> None:
        """Wake every `wait_for`: something was recorded."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(
        self, probe: Callable[[], T | Literal[False] | None], within: float = 5.0
    ) -> T:
        """Wait until `probe()` returns something truthy (checked after each change)."""
        async with asyncio.timeout(within):
            while not (found := probe()):
                await self._changed.wait()
        return found

    async def wait_connected(self, sessions: int = 1, within: float = 5.0) -> GatewaySession:
        """Wait until `sessions` clients identified and the newest is connected."""
        return await self.wait_for(
            lambda: (
                len(self.gateway.sessions) >= sessions
                and self.gateway.current.ws is not None
                and self.gateway.current
            ),
            within,
        )

    def sent_to(self, channel_id: int) -> list[SentMessage]:
        """Messages the bot posted in a channel."""
        return [m for m in self.messages if m.channel_id == channel_id]

    def replies_to(self, interaction_id: int) -> list[InteractionReply]:
        """What the bot answered to one interaction, in order."""
        return [r for r in self.interaction_replies if r.interaction_id == interaction_id]

    async def quiet(self, seconds: float = 0.3) -> None:
        """Let the bot finish whatever it might still send."""
        await asyncio.sleep(seconds)

    # events ------------------------------------------------------------------------

    def dm_channel(self, user_id: int) -> int:
        """The DM channel between the bot and a user (stable per user)."""
        if user_id not in self.dm_channels:
            self.dm_channels[user_id] = self.snowflake()
        return self.dm_channels[user_id]

    async def dm(
        self,
        user_id: int,
        content: str,
        *,
        name: str = "alice",
        attachments: list[Payload] | None = None,
        message_id: int | None = None,
        without: tuple[str, ...] = (),
    ) -> int:
        """A person writes to the bot in their DM; returns the message id. `without`
        leaves fields out of the event (a payload the library may fail to parse)."""
        message_id = message_id or self.snowflake()
        author = user_payload(user_id, name)
        payload = message_payload(
            message_id, self.dm_channel(user_id), author, content, attachments=attachments
        )
        for name in without:
            del payload[name]
        await self.gateway.dispatch("MESSAGE_CREATE", payload)
        return message_id

    async def dm_file(
        self, user_id: int, filename: str, content: bytes, *, size: int | None = None
    ) -> int:
        """A person sends the bot a file in their DM (served back from the fake's CDN)."""
        attachment_id = str(self.snowflake())
        self.uploads[attachment_id] = content
        attachment = {
            "id": attachment_id,
            "filename": filename,
            "size": len(content) if size is None else size,
            "url": f"{self.base_url}/attachments/{attachment_id}/{filename}",
            "proxy_url": f"{self.base_url}/attachments/{attachment_id}/{filename}",
        }
        return await self.dm(user_id, "", attachments=[attachment])

    async def _attachment(self, request: web.Request) -> web.Response:
        attachment_id = request.match_info["id"]
        if attachment_id not in self.uploads:
            return web.Response(status=404)
        self.downloads.append(attachment_id)
        return web.Response(body=self.uploads[attachment_id])

    async def _edit_message(self, request: web.Request, channel: str, message: str) -> web.Response:
        body, _ = await _read_body(request)
        for sent in self.messages:
            if sent.id == int(message) and sent.channel_id == int(channel):
                sent.content = body.get("content") or sent.content
                sent.components = body.get("components") or []
                self.edits.append((sent.id, sent.content))
                return json_response(self._message_json(sent))
        return json_response({"message": "Unknown Message", "code": 10008}, status=404)

    async def edit_dm(self, user_id: int, message_id: int, content: str) -> None:
        """A person edits a DM they sent."""
        author = user_payload(user_id, "alice")
        payload = message_payload(message_id, self.dm_channel(user_id), author, content)
        payload["edited_timestamp"] = "2026-03-02T09:05:00.000000+00:00"
        await self.gateway.dispatch("MESSAGE_UPDATE", payload)

    async def guild_message(
        self,
        user_id: int,
        content: str,
        *,
        mention: bool = False,
        reply_to: SentMessage | None = None,
        ping: bool = True,
        name: str = "bob",
    ) -> int:
        """A person writes in the server's #general; returns the message id.

        A reply pings its author unless `ping=False`. Unless the bot was granted the
        message content intent, the text of a message that does not mention it is empty.
        """
        message_id = self.snowflake()
        mentioned = mention or (reply_to is not None and ping)
        text = f"<@{BOT_ID}> {content}" if mention else content
        if not mentioned and not self.gateway.message_content:
            text = ""
        referenced = None
        if reply_to is not None:
            referenced = self._message_json(reply_to)
            referenced["guild_id"] = str(GUILD_ID)
        payload = message_payload(
            message_id,
            GUILD_CHANNEL_ID,
            user_payload(user_id, name),
            text,
            guild_id=GUILD_ID,
            mentions=[self.bot] if mentioned else [],
            referenced=referenced,
        )
        await self.gateway.dispatch("MESSAGE_CREATE", payload)
        return message_id

    async def slash(
        self, name: str, options: dict[str, str] | None = None, *, user_id: int, guild: bool = True
    ) -> int:
        """A person invokes `/name` with string options; returns the interaction id."""
        data: Payload = {
            "id": str(self.snowflake()),
            "name": name,
            "type": 1,
            "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()],
        }
        return await self._interaction(2, data, user_id=user_id, guild=guild)

    async def press(
        self,
        message: SentMessage,
        custom_id: str,
        *,
        user_id: int,
        guild: bool = False,
        without: tuple[str, ...] = (),
    ) -> int:
        """A person presses a button (by custom id) under a message; returns the interaction
        id. `without` leaves fields out of the event (e.g. `attachment_size_limit`)."""
        data = {"custom_id": custom_id, "component_type": 2}
        channel = GUILD_CHANNEL_ID if guild else self.dm_channel(user_id)
        msg = self._message_json(message)
        msg["channel_id"] = str(channel)
        return await self._interaction(
            3, data, user_id=user_id, guild=guild, message=msg, pressed=message, without=without
        )

    async def _interaction(
        self,
        kind: int,
        data: Payload,
        *,
        user_id: int,
        guild: bool,
        message: Payload | None = None,
        pressed: SentMessage | None = None,
        without: tuple[str, ...] = (),
    ) -> int:
        interaction_id, token = self.snowflake(), f"tok{self.snowflake()}"
        self.interactions[token] = interaction_id
        if pressed is not None:
            self._pressed[token] = pressed
        user = user_payload(user_id, "alice")
        payload: Payload = {
            "id": str(interaction_id),
            "application_id": str(APP_ID),
            "type": kind,
            "token": token,
            "version": 1,
            "data": data,
            "app_permissions": "2147483647",
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 26_214_400,
        }
        if guild:
            channel = {"id": str(GUILD_CHANNEL_ID), "type": 0, "guild_id": str(GUILD_ID)}
            payload |= {
                "guild_id": str(GUILD_ID),
                "guild_locale": "en-US",
                "channel_id": str(GUILD_CHANNEL_ID),
                "channel": channel | {"name": "general", "position": 0},
                "member": member_payload(user),
                "context": 0,
                "authorizing_integration_owners": {"0": str(GUILD_ID)},
            }
        else:
            channel_id = self.dm_channel(user_id)
            payload |= {
                "channel_id": str(channel_id),
                "channel": {"id": str(channel_id), "type": 1, "recipients": [user]},
                "user": user,
                "context": 1,
                "authorizing_integration_owners": {"0": "0"},
            }
        if message is not None:
            payload["message"] = message
        for name in without:
            del payload[name]
        await self.gateway.dispatch("INTERACTION_CREATE", payload)
        return interaction_id

    async def drop_connection(self) -> None:
        """Close the gateway socket mid-stream; events sent meanwhile wait for RESUME."""
        await self.gateway.drop()

    # gateway payloads --------------------------------------------------------------------

    def _ready(self, session: GatewaySession) -> Payload:
        ready: Payload = {
            "v": 10,
            "user": self.bot,
            "guilds": [{"id": str(GUILD_ID), "unavailable": True}],
            "session_id": session.session_id,
            "resume_gateway_url": self.gateway.url,
            "application": {"id": str(APP_ID), "flags": 0},
            "private_channels": [],
            "relationships": [],
        }
        if session.shard is not None:
            ready["shard"] = list(session.shard)
        return ready

    def _guilds(self) -> list[Payload]:
        everyone = {
            "id": str(GUILD_ID),
            "name": "@everyone",
            "permissions": str((1 << 41) - 1),
            "position": 0,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
        }
        channel = {
            "id": str(GUILD_CHANNEL_ID),
            "type": 0,
            "name": "general",
            "position": 0,
            "guild_id": str(GUILD_ID),
            "permission_overwrites": [],
        }
        return [
            {
                "id": str(GUILD_ID),
                "name": "Test Server",
                "owner_id": "1",
                "unavailable": False,
                "member_count": 3,
                "roles": [everyone],
                "channels": [channel],
                "members": [],
                "emojis": [],
                "stickers": [],
                "features": [],
                "threads": [],
            }
        ]

    # REST ----------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        self.requests.append((request.method, path))
        webhook = path.startswith(("/webhooks/", "/interactions/"))
        if not webhook and request.headers.get("Authorization") != f"Bot {TOKEN}":
            return json_response({"message": "401: Unauthorized", "code": 0}, status=401)
        for method, pattern, handler in self._routes():
            match = re.fullmatch(pattern, path)
            if match is not None and method == request.method:
                response = await handler(request, *match.groups())
                self._notify()
                return response
        return json_response({"message": "404: Not Found", "code": 0}, status=404)

    def _routes(self) -> list[tuple[str, str, Callable[..., Awaitable[web.StreamResponse]]]]:
        return [
            ("GET", r"/users/@me", self._get_me),
            ("GET", r"/(?:oauth2/)?applications/@me", self._get_application),
            ("GET", r"/gateway(?:/bot)?", self._get_gateway),
            ("POST", r"/users/@me/channels", self._create_dm),
            ("POST", r"/channels/(\d+)/messages", self._create_message),
            ("PATCH", r"/channels/(\d+)/messages/(\d+)", self._edit_message),
            ("POST", r"/channels/(\d+)/typing", self._typing),
            ("POST", r"/interactions/(\d+)/([^/]+)/callback", self._interaction_callback),
            ("POST", r"/webhooks/(\d+)/([^/]+)", self._followup),
            ("PATCH", r"/webhooks/(\d+)/([^/]+)/messages/([^/]+)", self._edit_webhook_message),
            ("DELETE", r"/webhooks/(\d+)/([^/]+)/messages/([^/]+)", self._delete_webhook_message),
            ("PUT", r"/applications/(\d+)/commands", self._bulk_overwrite_commands),
        ]

    async def _get_me(self, request: web.Request) -> web.Response:
        return json_response(self.bot)

    async def _get_application(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "id": str(APP_ID),
                "name": "Companion",
                "description": "",
                "icon": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": user_payload(1, "owner"),
                "verify_key": "00",
                "flags": 0,
                "bot": self.bot,
            }
        )

    async def _get_gateway(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return json_response(
            {
                "url": self.gateway.url,
                "shards": self.recommended_shards,
                "session_start_limit": limit,
            }
        )

    async def _create_dm(self, request: web.Request) -> web.Response:
        user_id = int((await request.json())["recipient_id"])
        return json_response(
            {
                "id": str(self.dm_channel(user_id)),
                "type": 1,
                "last_message_id": None,
                "recipients": [user_payload(user_id, f"user{user_id % 1000}")],
            }
        )

    async def _create_message(self, request: web.Request, channel: str) -> web.Response:
        body, files = await _read_body(request)
        owner = next((u for u, c in self.dm_channels.items() if c == int(channel)), None)
        if owner in self.closed_dms:
            return json_response(
                {"code": 50007, "message": "Cannot send messages to this user"}, status=403
            )
        if self.fail_sends:
            status, error = self.fail_sends.pop(0)
            return json_response(error, status=status)
        if self.rate_limit_sends > 0:
            self.rate_limit_sends -= 1
            self.rate_limited += 1
            return _rate_limited()
        invalid = _invalid_content(body)
        if invalid is not None:
            return invalid
        reference = (body.get("message_reference") or {}).get("message_id")
        message = self._record_message(int(channel), body, files, reference=reference)
        return json_response(self._message_json(message))

    async def _typing(self, request: web.Request, channel: str) -> web.Response:
        self.typing.append(int(channel))
        return web.Response(status=204, headers={"Via": "1.1 google"})

    async def _interaction_callback(
        self, request: web.Request, interaction: str, token: str
    ) -> web.Response:
        body, files = await _read_body(request)
        refused = self._refuse_callback(int(interaction), token)
        if refused is not None:
            return refused
        data = body.get("data") or {}
        invalid = _invalid_content(data)
        if invalid is not None:
            return invalid
        self._acknowledged.add(token)
        kind, flags = int(body["type"]), int(data.get("flags") or 0)
        message = None
        if kind in (4, 7):
            message = self._record_message(0, data, files, track=False)
        self.interaction_replies.append(
            InteractionReply(int(interaction), "callback", kind, flags, message)
        )
        resource: Payload = {"type": kind}
        if message is not None:
            resource["message"] = self._message_json(message)
        return json_response(
            {
                "interaction": {
                    "id": interaction,
                    "type": 2,
                    "response_message_loading": kind == 5,
                    "response_message_ephemeral": bool(flags & EPHEMERAL),
                },
                "resource": resource,
            }
        )

    def _refuse_callback(self, interaction: int, token: str) -> web.Response | None:
        """Discord's answer to a callback it will not take: unknown, or already answered."""
        if self.interactions.get(token) != interaction:
            self.rejected.append((interaction, 10062))
            return json_response({"message": "Unknown interaction", "code": 10062}, status=404)
        if token in self._acknowledged:
            self.rejected.append((interaction, 40060))
            return json_response(
                {"message": "Interaction has already been acknowledged.", "code": 40060},
                status=400,
            )
        return None

    def _unknown_webhook(self, token: str) -> web.Response | None:
        """Followups and edits need the token of a real interaction."""
        if token in self.interactions:
            return None
        return json_response({"message": "Unknown Webhook", "code": 10015}, status=404)

    async def _followup(self, request: web.Request, app: str, token: str) -> web.Response:
        body, files = await _read_body(request)
        unknown = self._unknown_webhook(token)
        if unknown is not None:
            return unknown
        invalid = _invalid_content(body)
        if invalid is not None:
            return invalid
        flags = int(body.get("flags") or 0)
        message = self._record_message(0, body, files, track=False)
        self.interaction_replies.append(
            InteractionReply(self.interactions[token], "followup", None, flags, message)
        )
        return json_response(self._message_json(message))

    async def _edit_webhook_message(
        self, request: web.Request, app: str, token: str, message_id: str
    ) -> web.Response:
        body, files = await _read_body(request)
        unknown = self._unknown_webhook(token)
        if unknown is not None:
            return unknown
        invalid = _invalid_content(body)
        if invalid is not None:
            return invalid
        pressed = self._pressed.get(token) if message_id == "@original" else None
        if pressed is not None:
            body.setdefault("flags", pressed.flags)
        message = self._record_message(
            0, body, files, track=False, message_id=pressed.id if pressed else None
        )
        interaction = self.interactions[token]
        self.interaction_replies.append(
            InteractionReply(interaction, "edit", None, message.flags, message)
        )
        return json_response(self._message_json(message))

    async def _delete_webhook_message(
        self, request: web.Request, app: str, token: str, message_id: str
    ) -> web.Response:
        unknown = self._unknown_webhook(token)
        if unknown is not None:
            return unknown
        interaction = self.interactions[token]
        self.interaction_replies.append(InteractionReply(interaction, "delete", None, 0, None))
        return web.Response(status=204, headers={"Via": "1.1 google"})

    async def _bulk_overwrite_commands(self, request: web.Request, app: str) -> web.Response:
        commands = await request.json()
        self.synced_commands.append(commands)
        answer = [
            {**c, "id": str(self.snowflake()), "application_id": app, "version": "1"}
            for c in commands
        ]
        return json_response(answer)

    def _record_message(
        self,
        channel_id: int,
        body: Payload,
        files: dict[str, bytes],
        *,
        reference: str | None = None,
        track: bool = True,
        message_id: int | None = None,
    ) -> SentMessage:
        message = SentMessage(
            id=message_id or self.snowflake(),
            channel_id=channel_id,
            content=body.get("content") or "",
            components=body.get("components") or [],
            files=files,
            flags=int(body.get("flags") or 0),
            reference=int(reference) if reference else None,
        )
        if track:
            self.messages.append(message)
        return message

    def _message_json(self, message: SentMessage) -> Payload:
        attachments = [
            {"id": str(i), "filename": name, "size": len(content), "url": "", "proxy_url": ""}
            for i, (name, content) in enumerate(message.files.items())
        ]
        return message_payload(
            message.id,
            message.channel_id or GUILD_CHANNEL_ID,
            self.bot,
            message.content,
            components=message.components,
            attachments=attachments,
            flags=message.flags,
        )


async def _read_body(request: web.Request) -> tuple[Payload, dict[str, bytes]]:
    """The JSON body, or a multipart body's `payload_json` and its files."""
    if not request.content_type.startswith("multipart/"):
        return (await request.json() if request.can_read_body else {}), {}
    form = await request.post()
    files: dict[str, bytes] = {}
    body: Payload = {}
    for name, value in form.items():
        if name == "payload_json":
            body = json.loads(str(value))
        elif isinstance(value, web.FileField):
            files[value.filename] = value.file.read()
    return body, files


def _invalid_content(body: Payload) -> web.Response | None:
    """The real 400 Invalid Form Body for content over 2,000 characters."""
    content = body.get("content") or ""
    if len(content) <= MAX_CONTENT:
        return None
    error = {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}
    return json_response(
        {
            "code": 50035,
            "message": "Invalid Form Body",
            "errors": {"content": {"_errors": [error]}},
        },
        status=400,
    )


def _rate_limited() -> web.Response:
    """A per-route 429, as Discord sends it."""
    return json_response(
        {"message": "You are being rate limited.", "retry_after": 0.05, "global": False},
        status=429,
        headers={
            "Retry-After": "1",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": "0.050",
            "X-RateLimit-Scope": "user",
        },
    )
