"""The websocket half of the Discord fake: HELLO, IDENTIFY → READY, heartbeats, RESUME
with replay of missed events, and a way to drop the connection mid-stream.

IDENTIFY's `intents` are recorded; asking for a privileged intent the application has
not been allowed (`allowed_privileged`, the developer portal's switches) closes the
socket with 4014 "Disallowed intent(s).", as Discord does.

Every session keeps its dispatch log, so a client that resumes with `seq` gets exactly
the events after it (plus `replay_overlap` already-delivered ones, as Discord may do).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

Payload = dict[str, Any]

HELLO, IDENTIFY, HEARTBEAT, HEARTBEAT_ACK, RESUME, INVALID_SESSION = 10, 2, 1, 11, 6, 9
DISPATCH = 0
GUILD_MEMBERS, GUILD_PRESENCES, MESSAGE_CONTENT = 1 << 1, 1 << 8, 1 << 15
PRIVILEGED_INTENTS = GUILD_MEMBERS | GUILD_PRESENCES | MESSAGE_CONTENT
DISALLOWED_INTENTS = 4014


@dataclass
class GatewaySession:
    """One identified gateway session: its shard, its dispatch log, its current socket."""

    session_id: str
    shard: tuple[int, int] | None
    log: list[Payload] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None

    @property
    def seq(self) -> int:
        return len(self.log)


class FakeGateway:
    """Discord's gateway protocol (v10, JSON, uncompressed text frames)."""

    def __init__(
        self,
        *,
        ready: Callable[[GatewaySession], Payload],
        guilds: Callable[[], list[Payload]],
        notify: Callable[[], None],
        heartbeat_ms: int = 500,
    ) -> None:
        self._ready = ready
        self._guilds = guilds
        self._notify = notify
        self.heartbeat_ms = heartbeat_ms
        self.url = ""
        self.sessions: list[GatewaySession] = []
        self.identifies: list[Payload] = []
        self.intents: list[int] = []  # the intents of every IDENTIFY, in order
        self.allowed_privileged = 0  # privileged intents switched on for the application
        self.resumes: list[Payload] = []
        self.heartbeats = 0
        self.replay_overlap = 0
        self.resume_gate: asyncio.Event | None = None
        self.replayed = 0
        self.bad_hellos = 0  # connections that get a HELLO without `heartbeat_interval`
        self._sockets: set[web.WebSocketResponse] = set()

    @property
    def current(self) -> GatewaySession:
        """The newest session (the one events go to by default)."""
        if not self.sessions:
            raise AssertionError("no client has identified yet")
        return self.sessions[-1]

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        """One websocket connection, from HELLO to close."""
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.add(ws)
        try:
            hello: Payload = {"heartbeat_interval": self.heartbeat_ms}
            if self.bad_hellos > 0:  # a HELLO the library cannot read (a protocol fault)
                self.bad_hellos -= 1
                hello = {}
            await ws.send_str(json.dumps({"op": HELLO, "d": hello}))
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                await self._on_frame(ws, json.loads(frame.data))
        finally:
            self._sockets.discard(ws)
            for session in self.sessions:
                if session.ws is ws:
                    session.ws = None
        return ws

    async def _on_frame(self, ws: web.WebSocketResponse, message: Payload) -> None:
        op, data = message.get("op"), message.get("d") or {}
        if op == HEARTBEAT:
            self.heartbeats += 1
            await ws.send_str(json.dumps({"op": HEARTBEAT_ACK}))
        elif op == IDENTIFY:
            await self._identify(ws, data)
        elif op == RESUME:
            await self._resume(ws, data)

    @property
    def message_content(self) -> bool:
        """Whether the newest session was granted the message content intent."""
        return bool(self.intents and self.intents[-1] & MESSAGE_CONTENT)

    async def _identify(self, ws: web.WebSocketResponse, data: Payload) -> None:
        intents = int(data.get("intents") or 0)
        self.identifies.append(data)
        self.intents.append(intents)
        if intents & PRIVILEGED_INTENTS & ~self.allowed_privileged:
            await ws.close(code=DISALLOWED_INTENTS, message=b"Disallowed intent(s).")
            return
        shard = data.get("shard")
        session = GatewaySession(uuid.uuid4().hex, tuple(shard) if shard else None, ws=None)
        self.sessions.append(session)
        await self.dispatch("READY", self._ready(session), session=session, ws=ws)
        for guild in self._guilds():
            await self.dispatch("GUILD_CREATE", guild, session=session, ws=ws)
        session.ws = ws
        self._notify()

    async def _resume(self, ws: web.WebSocketResponse, data: Payload) -> None:
        self.resumes.append(data)
        session = next((s for s in self.sessions if s.session_id == data["session_id"]), None)
        if session is None:
            await ws.send_str(json.dumps({"op": INVALID_SESSION, "d": False}))
            return
        if self.resume_gate is not None:
            await self.resume_gate.wait()
        start = max(0, int(data["seq"] or 0) - self.replay_overlap)
        for payload in session.log[start:]:
            self.replayed += 1
            await ws.send_str(json.dumps(payload))
        await ws.send_str(json.dumps({"op": DISPATCH, "t": "RESUMED", "s": None, "d": {}}))
        session.ws = ws
        self._notify()

    async def dispatch(
        self,
        event: str,
        data: Payload,
        *,
        session: GatewaySession | None = None,
        ws: web.WebSocketResponse | None = None,
    ) -> int:
        """Log an event in the session and send it if connected; returns its sequence."""
        session = session or self.current
        payload = {"op": DISPATCH, "t": event, "s": session.seq + 1, "d": data}
        session.log.append(payload)
        target = ws or session.ws
        if target is not None and not target.closed:
            with contextlib.suppress(ConnectionError):
                await target.send_str(json.dumps(payload))
        return session.seq

    async def drop(self, *, code: int = 4000) -> None:
        """Close the current session's socket, as a network blip would; the session lives on."""
        session = self.current
        ws, session.ws = session.ws, None
        if ws is not None:
            await ws.close(code=code, message=b"dropped by the test")

    async def close(self) -> None:
        """Close every open socket."""
        for ws in list(self._sockets):
            await ws.close(code=1001, message=b"fake shutting down")
        await asyncio.sleep(0)


# event payloads ----------------------------------------------------------------------


def user_payload(user_id: int, name: str, *, bot: bool = False) -> Payload:
    """A user object."""
    return {
        "id": str(user_id),
        "username": name,
        "global_name": name.title(),
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
    }


def member_payload(user: Payload | None = None) -> Payload:
    """A guild member object (with `user` for interactions, without for messages)."""
    member: Payload = {
        "roles": [],
        "joined_at": "2025-01-01T00:00:00+00:00",
        "deaf": False,
        "mute": False,
        "flags": 0,
        "permissions": "2147483647",
    }
    if user is not None:
        member["user"] = user
    return member


def message_payload(
    message_id: int,
    channel_id: int,
    author: Payload,
    content: str,
    *,
    guild_id: int | None = None,
    mentions: list[Payload] | None = None,
    referenced: Payload | None = None,
    attachments: list[Payload] | None = None,
    components: list[Payload] | None = None,
    flags: int = 0,
) -> Payload:
    """A message object as MESSAGE_CREATE and the REST API carry it."""
    message: Payload = {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "type": 19 if referenced is not None else 0,
        "content": content,
        "author": author,
        "mentions": mentions or [],
        "mention_roles": [],
        "mention_everyone": False,
        "attachments": attachments or [],
        "embeds": [],
        "components": components or [],
        "pinned": False,
        "tts": False,
        "flags": flags,
        "timestamp": "2026-03-02T09:00:00.000000+00:00",
        "edited_timestamp": None,
    }
    if guild_id is not None:
        message["guild_id"] = str(guild_id)
        if not author.get("bot"):
            message["member"] = member_payload()
    if referenced is not None:
        message["message_reference"] = {
            "type": 0,
            "message_id": referenced["id"],
            "channel_id": referenced["channel_id"],
            **({"guild_id": str(guild_id)} if guild_id is not None else {}),
        }
        message["referenced_message"] = referenced
    return message
