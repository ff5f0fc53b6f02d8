"""Every command the companion understands, with the text platforms show for it.

Adapters register these with their platform (Telegram's command menu, Discord's slash
commands); the handlers live beside this module.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A command's name, its one-line description, its optional free-text argument and,
    for a command that takes two (`/edit m12 new text`), the text after it."""

    name: str
    description: str
    argument: str | None = None
    argument_help: str = ""
    personal: bool = True
    text_option: str | None = None
    """A second, free-text argument (Discord shows it as its own required option)."""
    text_option_help: str = ""


COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo("start", "Meet the companion and set your timezone", personal=False),
    CommandInfo("help", "What I can do and how memory works", personal=False),
    CommandInfo("memory", "See what I remember", "query", "a page number, tier or words to find"),
    CommandInfo(
        "forget", "Forget something (or 'all')", "what", "a memory id like m12, text, or all"
    ),
    CommandInfo("pin", "Always keep a memory in mind", "what", "a memory id like m12, or text"),
    CommandInfo("unpin", "Stop pinning a memory", "what", "a memory id like m12, or text"),
    CommandInfo("remember", "Save something explicitly", "text", "what I should remember"),
    CommandInfo(
        "edit",
        "Correct a memory",
        "id",
        "a memory id like m12 (see /memory)",
        text_option="text",
        text_option_help="what the memory should say now",
    ),
    CommandInfo("cancel", "Stop waiting for a memory's new text"),
    CommandInfo("export", "Download everything I keep about you"),
    CommandInfo("diary", "Read my recent diary entries", "count", "how many entries"),
    CommandInfo("settings", "Timezone, check-ins, quiet hours, notices"),
    CommandInfo("timezone", "Set your timezone", "zone", "e.g. Europe/Copenhagen or a city"),
    CommandInfo("checkin", "Set the daily check-in time", "time", "HH:MM, or off"),
    CommandInfo("quiet", "Set quiet hours", "hours", "HH:MM-HH:MM, or off"),
    CommandInfo("pause", "Pause all messages I send on my own"),
    CommandInfo("resume", "Resume messages I send on my own"),
    CommandInfo(
        "import", "Bring in an old chat (send its export as a file)", "undo", "undo: remove it"
    ),
    CommandInfo(
        "link",
        "Link your accounts on other platforms",
        "code",
        "the code /link gave you on your other platform (empty for a new code)",
    ),
    CommandInfo("unlink", "Take this account out of your linked accounts"),
)
