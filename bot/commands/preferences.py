"""`/settings` and its direct forms: `/timezone`, `/checkin`, `/quiet`, `/pause`,
`/resume`. A change to any of them reschedules the next check-in at once."""

from __future__ import annotations

from datetime import time
from typing import Any

from bot.commands.base import ButtonSpec, CommandDeps, make_buttons
from bot.domain import Reply
from bot.timezones import Place, find_timezone, suggestions
from bot.timing import next_checkin, parse_range, parse_time
from memory.store.records import Person

CHECKIN_CHOICES = ("08:00", "09:00", "12:00", "18:00", "20:00")
QUIET_CHOICES = ("22:00-08:00", "23:00-07:00", "21:00-09:00")
TIMEZONE_CHOICES = (
    ("London", "Europe/London"),
    ("Paris", "Europe/Paris"),
    ("Berlin", "Europe/Berlin"),
    ("Moscow", "Europe/Moscow"),
    ("Dubai", "Asia/Dubai"),
    ("India", "Asia/Kolkata"),
    ("Singapore", "Asia/Singapore"),
    ("China", "Asia/Shanghai"),
    ("Tokyo", "Asia/Tokyo"),
    ("Sydney", "Australia/Sydney"),
    ("Auckland", "Pacific/Auckland"),
    ("São Paulo", "America/Sao_Paulo"),
    ("New York", "America/New_York"),
    ("Chicago", "America/Chicago"),
    ("Denver", "America/Denver"),
    ("Los Angeles", "America/Los_Angeles"),
    ("Honolulu", "Pacific/Honolulu"),
    ("UTC", "UTC"),
)
# kind → (question, (label, value) choices); check-ins and quiet hours can also be off
MENUS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "checkin": (
        "When should I check in each day?",
        tuple((c, c) for c in (*CHECKIN_CHOICES, "off")),
    ),
    "quiet": ("Which quiet hours?", tuple((c, c) for c in (*QUIET_CHOICES, "off"))),
    "timezone": (
        "Which timezone are you in? If it isn't here, send /timezone and your city, "
        "e.g. /timezone Lisbon.",
        TIMEZONE_CHOICES,
    ),
}


def _hhmm(value: time | None) -> str:
    return value.strftime("%H:%M") if value is not None else "off"


def describe_settings(person: Person) -> str:
    """The person's settings, one per line."""
    quiet = (
        f"{_hhmm(person.quiet_start)}–{_hhmm(person.quiet_end)}"
        if person.quiet_start and person.quiet_end
        else "off"
    )
    return "\n".join(
        [
            "Your settings:",
            f"• Timezone: {person.timezone}{'' if person.timezone_known else ' (not set yet)'}  "
            "(/timezone Copenhagen)",
            f"• Daily check-in: {_hhmm(person.checkin_time)}  (/checkin 09:00 or off)",
            f"• Quiet hours: {quiet}  (/quiet 22:00-08:00 or off)",
            f"• Messages I start: {'paused' if person.paused else 'on'}  (/pause, /resume)",
            f"• Memory notices: {'on' if person.memory_notices else 'off'}",
        ]
    )


async def update(deps: CommandDeps, person: Person, **values: Any) -> Person:
    """Save settings and reschedule the next check-in in the (new) timezone; nothing is
    scheduled while paused or before the timezone is known (setting one makes it so)."""
    merged = {
        "timezone": person.timezone,
        "timezone_known": person.timezone_known or "timezone" in values,
        "checkin_time": person.checkin_time,
        "paused": person.paused,
        **values,
    }
    values["next_checkin_at"] = (
        None
        if merged["paused"] or not merged["timezone_known"]
        else next_checkin(deps.clock.now(), merged["timezone"], merged["checkin_time"])
    )
    return await deps.store.update_person(person.id, **values)


async def settings_view(deps: CommandDeps, person: Person) -> Reply:
    """The settings with buttons to change them."""
    rows = [
        [
            ButtonSpec("Timezone…", "timezone_menu", {}),
            ButtonSpec("Check-in time…", "checkin_menu", {}),
            ButtonSpec("Quiet hours…", "quiet_menu", {}),
        ],
        [
            ButtonSpec(
                "Resume" if person.paused else "Pause", "set", {"paused": not person.paused}
            ),
            ButtonSpec(
                f"Memory notices: {'turn off' if person.memory_notices else 'turn on'}",
                "set",
                {"memory_notices": not person.memory_notices},
            ),
        ],
    ]
    return Reply(describe_settings(person), await make_buttons(deps, person, rows), private=True)


async def choice_menu(deps: CommandDeps, person: Person, kind: str) -> Reply:
    """Preset choices for the timezone, the check-in time or quiet hours."""
    question, choices = MENUS[kind]
    specs = [ButtonSpec(label, kind, {"value": value}) for label, value in choices]
    rows = [specs[i : i + 3] for i in range(0, len(specs), 3)]
    return Reply(question, await make_buttons(deps, person, rows), private=True)


async def set_flags(deps: CommandDeps, person: Person, payload: dict[str, Any]) -> Reply:
    """A settings button (pause, notices) was pressed."""
    values = {k: bool(v) for k, v in payload.items() if k in {"paused", "memory_notices"}}
    return await settings_view(deps, await update(deps, person, **values))


async def timezone_command(deps: CommandDeps, person: Person, args: str) -> Reply:
    """`/timezone <IANA name or city>`."""
    if not args.strip() and not person.timezone_known:
        return await choice_menu(deps, person, "timezone")
    if not args.strip():
        return Reply(
            f"Your timezone is {person.timezone}. To change it: /timezone Europe/Copenhagen "
            "or /timezone Copenhagen.",
            private=True,
        )
    answer = find_timezone(args)
    if answer.timezone is None and answer.candidates:
        return await _which_zone(deps, person, args.strip(), answer.candidates)
    if answer.timezone is None:
        close = suggestions(args)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        return Reply(
            f"I don't know the timezone “{args.strip()[:40]}”.{hint} Try a city or an IANA "
            "name, e.g. /timezone Copenhagen, /timezone Portland, Oregon or "
            "/timezone America/New_York.",
            private=True,
        )
    await update(deps, person, timezone=answer.timezone)
    return Reply(f"Timezone set to {answer.timezone}.", private=True)


async def _which_zone(
    deps: CommandDeps, person: Person, asked: str, places: tuple[Place, ...]
) -> Reply:
    """Several places by that name keep different times: ask which one."""
    listing = "\n".join(f"• {place.label} — {place.timezone}" for place in places)
    specs = [
        ButtonSpec(
            ", ".join(p for p in (place.name, place.region or place.country) if p),
            "timezone",
            {"value": place.timezone},
        )
        for place in places
    ]
    rows = [specs[i : i + 2] for i in range(0, len(specs), 2)]
    return Reply(
        f"“{asked[:40]}” could be more than one place — which one?\n{listing}",
        await make_buttons(deps, person, rows),
        private=True,
    )


async def checkin_command(deps: CommandDeps, person: Person, args: str) -> Reply:
    """`/checkin <HH:MM | off>`."""
    word = args.strip().lower()
    if word == "off":
        await update(deps, person, checkin_time=None)
        return Reply("Daily check-ins are off. /checkin 09:00 turns them back on.", private=True)
    at = parse_time(word)
    if at is None:
        return Reply(
            "Give me a time like /checkin 09:00 (24-hour) or /checkin 9am, or /checkin off.",
            private=True,
        )
    updated = await update(deps, person, checkin_time=at)
    return Reply(f"I'll check in around {at:%H:%M} ({updated.timezone}).", private=True)


async def quiet_command(deps: CommandDeps, person: Person, args: str) -> Reply:
    """`/quiet <HH:MM-HH:MM | off>`."""
    word = args.strip().lower()
    if word == "off":
        await update(deps, person, quiet_start=None, quiet_end=None)
        return Reply("Quiet hours are off.", private=True)
    hours = parse_range(word)
    if hours is None:
        return Reply(
            "Give me a range like /quiet 22:00-08:00 (it may cross midnight), or /quiet off.",
            private=True,
        )
    await update(deps, person, quiet_start=hours[0], quiet_end=hours[1])
    return Reply(f"Quiet hours set: {hours[0]:%H:%M}–{hours[1]:%H:%M}.", private=True)


async def pause_command(deps: CommandDeps, person: Person, paused: bool) -> Reply:
    """`/pause` and `/resume`."""
    await update(deps, person, paused=paused)
    if paused:
        return Reply(
            "Paused: I won't start conversations until you send /resume. I'm still here "
            "whenever you write.",
            private=True,
        )
    return Reply("Resumed: I'll check in again as set in /settings.", private=True)
