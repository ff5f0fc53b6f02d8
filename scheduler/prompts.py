"""What the models are asked by the scheduler, and the shapes their answers must have:
the check-in decision (chat model), the diary and merged memory text (fast model).

The rules against guilt-tripping and clinginess are stated here once, and checked again
in code on the draft (`clingy`) before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.llm import ToolSpec
from memory.learning.extraction_prompt import strip_memory_blocks
from memory.person_words import DATA_RULE, block, conversation, element
from memory.store.records import StoredMessage

CHECKIN_RULES = f"""You are about to start a conversation on your own: the person has not \
written to you. Rules for messages you start:
- Never guilt-trip and never be clingy. Never say or imply "I miss you", "I've missed \
you", "you haven't written", "where have you been", "are you ignoring me", "why didn't \
you reply", or that you were waiting for them or felt lonely.
- No pressure to reply: make it easy to ignore. Never demand, insist or nag.
- Short: one to three sentences, warm and plain, in their language. At most one question.
- Be specific when you can: something from what you remember about their life (an \
event today, how something went, an open thread, how your last conversation ended, your \
notes to self). Never invent details you do not remember.
- If there is nothing worth saying, stay silent: decide not to send. Silence is better \
than a generic message.
- Decide with the `decide_checkin` tool.
{DATA_RULE}"""

NO_GUILT_RULES = (
    "Never guilt-trip and never be clingy",
    "I miss you",
    "you haven't written",
    "are you ignoring me",
    "No pressure to reply",
    "At most one question",
    "stay silent",
)

DECIDE_TOOL = ToolSpec(
    name="decide_checkin",
    description="Decide whether to send the person a message now, and write it if so.",
    input_schema={
        "type": "object",
        "properties": {
            "send": {"type": "boolean", "description": "false to stay silent this time"},
            "message": {
                "type": "string",
                "description": "The message to send (empty when not sending).",
                "maxLength": 800,
            },
        },
        "required": ["send", "message"],
    },
)

_CLINGY = re.compile(
    r"\b(miss(ed|ing)? you|haven'?t (heard|written|replied)|you (never|didn'?t|haven'?t) "
    r"(write|wrote|written|reply|replied|answer|answered|text|texted)|ignor(e|es|ing) me|"
    r"where have you been|why (didn'?t|don'?t|haven'?t) you|waiting for you|lonely without)",
    re.IGNORECASE,
)


class CheckinDecision(BaseModel):
    """The chat model's answer: send this message, or stay silent."""

    model_config = ConfigDict(extra="ignore")

    send: bool
    message: str = Field("", max_length=1200)


def clingy(message: str) -> bool:
    """Whether a draft breaks the no-guilt, no-clinginess rules (then it is not sent)."""
    return _CLINGY.search(message) is not None


def checkin_instruction(occasion: str) -> str:
    """The turn that asks the model for a decision."""
    return (
        "[This is not a message from the person; it is your scheduler.]\n"
        f"{occasion}\nDecide now with the decide_checkin tool."
    )


DIARY_SYSTEM = f"""You keep a private diary about your conversations with one person you \
care about. You write in your own voice (first person, as the companion), warm and \
honest, never sentimental or clingy. The day's conversation is quoted as <message> \
elements between <conversation> and </conversation> (yours are from="companion"), what \
you remember as <item> elements between <remembered> and </remembered>. {DATA_RULE} Use \
only what is in them; never invent."""

DIARY_TOOL = ToolSpec(
    name="write_diary",
    description="Write today's diary entry and your notes to self for tomorrow.",
    input_schema={
        "type": "object",
        "properties": {
            "lines": {
                "type": "array",
                "description": "3 to 5 short lines about the day's conversations.",
                "items": {"type": "string", "maxLength": 300},
                "minItems": 3,
                "maxItems": 5,
            },
            "notes_to_self": {
                "type": "array",
                "description": "3 to 7 short notes for your next conversations with them "
                "(what to ask about, what to remember, what to avoid).",
                "items": {"type": "string", "maxLength": 300},
                "minItems": 3,
                "maxItems": 7,
            },
        },
        "required": ["lines", "notes_to_self"],
    },
)


def _clean_items(value: object) -> object:
    if isinstance(value, list):
        return [str(v).strip()[:300] for v in value if str(v).strip()]
    return value


class DiaryAnswer(BaseModel):
    """The fast model's diary entry."""

    model_config = ConfigDict(extra="ignore")

    lines: list[str] = Field(min_length=3, max_length=5)
    notes_to_self: list[str] = Field(min_length=3, max_length=7)

    @field_validator("lines", "notes_to_self", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return _clean_items(value)


def diary_prompt(
    messages: Sequence[StoredMessage], memories: Sequence[str], zone: ZoneInfo, day: str
) -> str:
    """The day's conversation and what is remembered, as escaped data."""
    known = [element("item", memory) for memory in memories] or ["(nothing yet)"]
    turns = conversation(
        messages, zone=zone, stamp="%H:%M", max_chars=1500, clean=strip_memory_blocks
    )
    return (
        f"The day: {day}.\n\nWhat you remember about them (data):\n"
        f"{block('remembered', known)}\n\n{turns}\n\n"
        "Write 3-5 diary lines about the day and 3-7 notes to self for tomorrow."
    )


MERGE_SYSTEM = f"""Two remembered notes about one person say nearly the same thing. Write \
one note that keeps every detail of both, in third person, in one or two sentences. The \
notes are quoted between <note> and </note>. {DATA_RULE}"""

MERGE_TOOL = ToolSpec(
    name="merge_memories",
    description="The single merged note.",
    input_schema={
        "type": "object",
        "properties": {"content": {"type": "string", "maxLength": 500}},
        "required": ["content"],
    },
)


class MergedText(BaseModel):
    """The fast model's merged note."""

    model_config = ConfigDict(extra="ignore")

    content: str = Field(min_length=3, max_length=500)


def merge_prompt(kept: str, other: str) -> str:
    """The two notes to merge."""
    return f"{element('note', kept)}\n{element('note', other)}"


def describe_event(content: str, event_at: datetime, zone: ZoneInfo) -> str:
    """'Job interview at Acme (Tue 3 Mar, 14:00)' in the person's timezone."""
    local = event_at.astimezone(zone)
    clock = "" if (local.hour, local.minute) == (0, 0) else f", {local:%H:%M}"
    return f"{content} ({local:%a %-d %b}{clock})"
