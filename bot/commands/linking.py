"""`/link`, `/link CODE` and `/unlink`: one person across platforms.

`/link` hands a one-time code privately to the account that asked; `/link CODE` sent
from an account on another platform joins the two into one person (the older account's
settings stay unless the person picks the other's, and they pick where check-ins go).
Codes are never shown or taken in a group chat: one sent there is void at once.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from bot.commands.base import ButtonSpec, CommandDeps, make_buttons, person_of
from bot.commands.preferences import describe_settings, update
from bot.domain import IncomingMessage, Reply
from memory.care.linking import (
    Linked,
    NotLinked,
    Refusal,
    choose_outreach,
    linked_platforms,
    redeem_code,
    unlink_account,
)
from memory.store.link_codes import issue_code, void_code
from memory.store.records import Person

PRIVATE_ONLY = (
    "Linking accounts only works in a private chat with me, so nobody else sees a code. "
    "Send /link to me privately."
)
VOIDED = (
    "Link codes only work in a private chat. In case others saw it, that code no longer "
    "works: send /link to me privately on your other platform for a new one."
)
REFUSALS = {
    Refusal.WRONG: (
        "That code doesn't match any link code. Check it (it looks like ABCD-EFGH), or send "
        "/link on your other platform for a new one. Nothing was changed."
    ),
    Refusal.EXPIRED: (
        "That code has expired (codes last 10 minutes). Send /link on your other platform "
        "for a new one. Nothing was changed."
    ),
    Refusal.VOID: (
        "That code no longer works: it was shown in a group chat, or sent from the wrong "
        "account too often. Send /link on your other platform for a new one. Nothing was "
        "changed."
    ),
    Refusal.USED: (
        "That code was already used (each code works once). Send /link on your other "
        "platform for a new one. Nothing was changed."
    ),
    Refusal.OWN: (
        "That code is already yours here: send it from your account on the other platform "
        "(one that isn't linked yet). Nothing was changed."
    ),
    Refusal.SAME_PLATFORM: (
        "That code was made on this platform too: send it from your account on a different "
        "platform. Nothing was changed."
    ),
}
SHOWN_CONFLICTS = 5


def _platform(name: str) -> str:
    return {"telegram": "Telegram", "discord": "Discord", "console": "the terminal"}.get(
        name, name.title()
    )


def _account(incoming: IncomingMessage) -> dict[str, str]:
    """The platform account a command came from, as the linking functions name it."""
    return {"platform": incoming.platform, "platform_user_id": incoming.platform_user_id}


def _minutes_until(moment: datetime | None, now: datetime) -> int:
    return max(1, int(((moment or now) - now).total_seconds() + 59) // 60)


async def link_command(deps: CommandDeps, incoming: IncomingMessage, args: str) -> Reply:
    """`/link` (a new code) or `/link CODE` (join the account that asked for it)."""
    if not incoming.is_private:
        if args.strip():
            await void_code(deps.sessions, text=args)
            return Reply(VOIDED, private=True)
        return Reply(PRIVATE_ONLY, private=True)
    person = await person_of(deps, incoming)
    if args.strip():
        return await _redeem(deps, incoming, args)
    return await _issue(deps, person, incoming)


async def _issue(deps: CommandDeps, person: Person, incoming: IncomingMessage) -> Reply:
    """A fresh code for this account, shown only here."""
    now = deps.clock.now()
    issued = await issue_code(deps.sessions, **_account(incoming), now=now)
    if issued.code is None:
        wait = _minutes_until(issued.retry_at, now)
        return Reply(
            f"You've asked for several codes in a short while. Try again in {wait} minutes.",
            private=True,
        )
    text = (
        f"Your link code: {issued.code}\n\n"
        f"On your other platform, send me /link {issued.code} in a private chat. It works "
        "once, for 10 minutes. Keep it to yourself: whoever sends it joins my memories of you."
    )
    platforms = await linked_platforms(deps.sessions, user_id=person.id)
    if len(platforms) < 2:
        return Reply(text, private=True)
    listing = ", ".join(_platform(p) for p, _ in platforms)
    rows = [_checkin_buttons([p for p, _ in platforms])]
    buttons = await make_buttons(deps, person, rows, ttl=timedelta(days=1))
    return Reply(
        f"{text}\n\nLinked now: {listing}. {_checkins_line(platforms)} /unlink takes this "
        "account out again.",
        buttons,
        private=True,
    )


def _checkins_line(platforms: list[tuple[str, bool]]) -> str:
    chosen = [p for p, outreach in platforms if outreach]
    where = _platform(chosen[0]) if chosen else "your newest account"
    return f"Check-ins go to {where}."


def _checkin_buttons(platforms: list[str] | tuple[str, ...]) -> list[ButtonSpec]:
    """One 'Check-ins on …' button per linked platform."""
    return [
        ButtonSpec(f"Check-ins on {_platform(p)}", "outreach", {"p": p})
        for p in sorted(set(platforms))
    ]


async def _redeem(deps: CommandDeps, incoming: IncomingMessage, args: str) -> Reply:
    """Join this account with the one that asked for the code."""
    now = deps.clock.now()
    code = args.strip()[:40]
    outcome = await redeem_code(deps.sessions, **_account(incoming), code=code, now=now)
    if isinstance(outcome, NotLinked):
        if outcome.reason is Refusal.TOO_MANY:
            wait = _minutes_until(outcome.retry_at, now)
            return Reply(
                f"Too many wrong codes in a short while. Try again in {wait} minutes. "
                "Nothing was changed.",
                private=True,
            )
        return Reply(REFUSALS[outcome.reason], private=True)
    person = await person_of(deps, incoming)
    return await _linked_reply(deps, person, outcome)


async def _linked_reply(deps: CommandDeps, person: Person, linked: Linked) -> Reply:
    """What joining did, with buttons for where check-ins go and whose settings to keep."""
    listing = " and ".join(_platform(p) for p in linked.platforms)
    lines = [
        f"Linked: {listing} are now one person to me — the same memories, one daily "
        "check-in. Everything (/memory, /forget, /export, /pause, quiet hours) applies to "
        "both."
    ]
    if linked.merged:
        same = "memory was" if linked.merged == 1 else "memories were"
        lines.append(f"{linked.merged} {same} the same on both sides: I kept one of each.")
    if linked.conflicts:
        shown = linked.conflicts[:SHOWN_CONFLICTS]
        pairs = "\n".join(
            f"• m{c.short_id} “{c.content}” / m{c.other_short_id} “{c.other_content}”"
            for c in shown
        )
        lines.append(
            f"These may disagree, so I kept both — fix them with /edit or /forget:\n{pairs}"
        )
    lines.append(describe_settings(person).replace("Your settings:", "Settings kept:"))
    other = _platform(linked.other_platform)
    specs = [
        _checkin_buttons(linked.platforms),
        [ButtonSpec(f"Use {other}'s settings", "link_settings", {"s": linked.other_settings})],
    ]
    buttons = await make_buttons(deps, person, specs, ttl=timedelta(days=1))
    return Reply("\n\n".join(lines), buttons, private=True)


async def outreach_choice(deps: CommandDeps, person: Person, payload: dict[str, Any]) -> Reply:
    """A 'Check-ins on …' button: send the person's check-ins to that platform."""
    platform = str(payload.get("p", ""))
    if not await choose_outreach(deps.sessions, user_id=person.id, platform=platform):
        return Reply("That account isn't linked any more — nothing changed.", private=True)
    return Reply(
        f"Check-ins will come on {_platform(platform)} — one a day, wherever you write.",
        private=True,
    )


async def take_settings(deps: CommandDeps, person: Person, payload: dict[str, Any]) -> Reply:
    """'Use …'s settings': the joined account's settings replace the kept ones."""
    raw = payload.get("s") or {}
    values: dict[str, Any] = {
        name: raw[name]
        for name in ("timezone", "timezone_known", "paused", "memory_notices")
        if name in raw
    }
    for name in ("checkin_time", "quiet_start", "quiet_end"):
        if name in raw:
            values[name] = time.fromisoformat(raw[name]) if raw[name] else None
    if not values.get("timezone_known", True):
        values.pop("timezone", None)  # an unknown zone never replaces a known one
        values.pop("timezone_known")
    updated = await update(deps, person, **values)
    return Reply(describe_settings(updated), private=True)


async def unlink_command(deps: CommandDeps, incoming: IncomingMessage) -> Reply:
    """`/unlink`: ask before taking this account out of the linked person."""
    person = await person_of(deps, incoming)
    platforms = await linked_platforms(deps.sessions, user_id=person.id)
    if len(platforms) < 2:
        return Reply("This account isn't linked to any other, so there's nothing to unlink.")
    here = _platform(incoming.platform)
    account = {"platform": incoming.platform, "id": incoming.platform_user_id}
    buttons = await make_buttons(
        deps,
        person,
        [[ButtonSpec(f"Unlink {here}", "unlink", account), ButtonSpec("Cancel", "keep", {})]],
        ttl=timedelta(minutes=10),
        single_use=True,
    )
    return Reply(
        f"Unlinking makes this {here} account a new person to me: it starts with nothing "
        "remembered, and everything so far stays with your other accounts. Unlink it?",
        buttons,
        private=True,
    )


async def unlink(deps: CommandDeps, person: Person, payload: dict[str, Any]) -> Reply:
    """The confirmed unlink."""
    platform = str(payload.get("platform", ""))
    fresh = await unlink_account(
        deps.sessions,
        platform=platform,
        platform_user_id=str(payload.get("id", "")),
        now=deps.clock.now(),
    )
    if fresh is None:
        return Reply("That account isn't linked to any other any more — nothing changed.")
    return Reply(
        f"Unlinked: your {_platform(platform)} account is a new person to me now, starting "
        "fresh. /link joins it again.",
        private=True,
    )
