"""Gateway events discord.py cannot parse are dropped, not fatal.

discord.py turns each gateway DISPATCH into objects with a parser (`ConnectionState.
parsers`, e.g. `INTERACTION_CREATE` → `Interaction(data=...)`) called straight from the
websocket's receive loop. A payload missing a field the library reads (as has happened
upstream: discord.py #2429, #4081, #7649) raises there, and that exception escapes
`Client.start()`, ending the connection. `guard_parsers` wraps every parser so such an
event is dropped with one structured error line — its type, error and ids, never its
content — and the connection stays up. Errors in our own handlers never get here:
discord.py runs those in tasks and reports them to `on_error`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, MutableMapping
from typing import Any

import structlog

log = structlog.get_logger(__name__)

Parser = Callable[[Any], Any]
_FIELD = re.compile(r"[a-z_][a-z0-9_]{0,63}")
_ID_KEYS = ("id", "guild_id", "channel_id", "message_id", "application_id")


def guard_parsers(parsers: MutableMapping[str, Parser]) -> None:
    """Wrap each of discord.py's event parsers (in place) so a failure drops the event."""
    for event, parse in list(parsers.items()):
        if not getattr(parse, "_companion_guarded", False):
            parsers[event] = _guarded(event, parse)


def _guarded(event: str, parse: Parser) -> Parser:
    def run(data: Any) -> Any:
        try:
            return parse(data)
        except Exception as exc:
            log.error("discord.event_dropped", event_type=event, **_describe(exc, data))
            return None

    run._companion_guarded = True  # type: ignore[attr-defined]
    return run


def _describe(exc: Exception, data: Any) -> dict[str, Any]:
    """The error and the payload's ids (snowflakes and a missing field's name only)."""
    found: dict[str, Any] = {"error": type(exc).__name__}
    field = exc.args[0] if isinstance(exc, KeyError) and exc.args else None
    if isinstance(field, str) and _FIELD.fullmatch(field):  # the field the payload lacked
        found["missing_field"] = field
    if not isinstance(data, dict):
        return found
    for key in _ID_KEYS:
        if _snowflake(data.get(key)):
            found[key] = str(data[key])
    person = _person(data)
    if person is not None:
        found["discord_user_id"] = person
    return found


def _person(data: dict[str, Any]) -> str | None:
    """The id of whoever caused the event: a message's author, an interaction's user."""
    member = data.get("member")
    nested = member.get("user") if isinstance(member, dict) else None
    for holder in (data.get("author"), data.get("user"), nested):
        if isinstance(holder, dict) and _snowflake(holder.get("id")):
            return str(holder["id"])
    return None


def _snowflake(value: Any) -> bool:
    return isinstance(value, str | int) and str(value).isdigit()
