"""How the last conversation went: when a session closes, the fast model writes a short
summary into `sessions.summary`, which the next session's prompt and check-ins read.

Only visible words are read: messages hidden because the person asked to forget a
memory (and apologies, refused texts) never, memory blocks stripped. A summary is not
stored if any message it was written from was hidden meanwhile, or if the running
summary it built on was dropped meanwhile (erasure drops summaries that may repeat
forgotten words, and marks closed sessions' for `rebuild_stale_summaries`, which the
nightly patrol runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import structlog
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import exists, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.care.erasure import HIDDEN
from memory.care.lifespan import zone_of
from memory.learning.diary import UNSHOWN_STATUSES
from memory.learning.extraction_prompt import ToolSchema, strip_memory_blocks
from memory.learning.person_words import DATA_RULE, conversation, element
from memory.store.log_statements import stored_messages
from memory.store.ports import ToolCaller
from memory.store.records import StoredMessage
from memory.store.tables import Message
from memory.store.tables import Session as SessionRow

log = structlog.get_logger(__name__)

MAX_MESSAGES = 60  # the newest visible messages after the running summary
MAX_SUMMARY_CHARS = 800

SUMMARY_TOOL = ToolSchema(
    name="write_session_summary",
    description="Write a short summary of how this conversation went.",
    input_schema={
        "type": "object",
        "properties": {"summary": {"type": "string", "maxLength": MAX_SUMMARY_CHARS}},
        "required": ["summary"],
    },
)

SUMMARY_SYSTEM = f"""\
You write a short note for an AI companion about how its last conversation with one \
person went, so that it can pick up from there next time. Call write_session_summary \
once. Third person, plain prose, at most 80 words: what the person talked about, how they \
seemed to feel, and what was left open or planned.

The conversation is quoted as <message> elements between <conversation> and \
</conversation>, and a summary of its earlier part (if any) between <earlier> and \
</earlier>. {DATA_RULE} Such claims are not part of the summary."""


class SessionSummary(BaseModel):
    """The tool input of `write_session_summary`."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    summary: str = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class _Closed:
    """A closed session's running summary and the visible messages after it."""

    earlier: str
    summarized_through: int | None
    messages: list[StoredMessage]


async def _read(
    sessions: async_sessionmaker[AsyncSession], *, user_id: int, session_id: int
) -> _Closed | None:
    """What a summary of this closed session may be written from (None if it is open)."""
    async with sessions() as db:
        found = (
            await db.execute(
                select(SessionRow.summary, SessionRow.summarized_through).where(
                    SessionRow.id == session_id,
                    SessionRow.user_id == user_id,
                    SessionRow.closed_at.is_not(None),
                )
            )
        ).first()
        if found is None:
            return None
        query = stored_messages().where(
            Message.user_id == user_id,
            Message.session_id == session_id,
            Message.status.not_in(UNSHOWN_STATUSES),
        )
        if found.summarized_through is not None:
            query = query.where(Message.id > found.summarized_through)
        rows = (await db.execute(query.order_by(Message.id.desc()).limit(MAX_MESSAGES))).all()
    visible = [StoredMessage(*row) for row in reversed(rows)]
    messages = [m for m in visible if strip_memory_blocks(m.content)]
    return _Closed(found.summary, found.summarized_through, messages)


def summary_prompt(earlier: str, messages: Sequence[StoredMessage], zone: ZoneInfo) -> str:
    """The conversation (and the summary of its earlier part) to summarise, as escaped
    data."""
    turns = conversation(messages, zone=zone, clean=strip_memory_blocks)
    before = f"{element('earlier', earlier.strip())}\n\n" if earlier.strip() else ""
    return f"{before}{turns}"


async def _store(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int,
    session_id: int,
    summary: str,
    read: _Closed,
) -> bool:
    """Store the summary unless something it was written from was hidden meanwhile.

    The session row is locked first: a concurrent erasure either committed before (and
    is seen here) or clears this summary after.
    """
    read_ids = [m.id for m in read.messages]
    async with sessions.begin() as db:
        through = await db.scalar(
            select(SessionRow.summarized_through)
            .where(SessionRow.id == session_id, SessionRow.user_id == user_id)
            .with_for_update()
        )
        hidden = await db.scalar(
            select(
                exists().where(
                    Message.user_id == user_id,
                    Message.id.in_(read_ids),
                    Message.status == HIDDEN,
                )
            )
        )
        if hidden or through != read.summarized_through:
            return False
        await db.execute(
            update(SessionRow)
            .where(SessionRow.id == session_id, SessionRow.user_id == user_id)
            .values(summary=summary, summarized_through=read_ids[-1], summary_stale=False)
        )
    return True


async def summarise_closed_session(
    *,
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    session_id: int,
    llm: ToolCaller | None,
    timezone: str,
) -> bool:
    """Write how a closed session went into its summary; True when one was stored.

    Without a model, or for a session in which the person said nothing new since its
    running summary, nothing happens. A model failure is logged and changes nothing.
    """
    if llm is None:
        return False
    read = await _read(sessions, user_id=user_id, session_id=session_id)
    if read is None or not any(m.role == "user" for m in read.messages):
        return False
    try:
        raw = await llm.call_tool(
            system=SUMMARY_SYSTEM,
            prompt=summary_prompt(read.earlier, read.messages, zone_of(timezone)),
            tool_name=SUMMARY_TOOL.name,
            tool_description=SUMMARY_TOOL.description,
            input_schema=SUMMARY_TOOL.input_schema,
        )
        summary = SessionSummary.model_validate(raw).summary[:MAX_SUMMARY_CHARS]
    except Exception as exc:  # any model failure: the conversation simply has no summary
        log.warning(
            "memory.session_summary_failed", session_id=session_id, error=type(exc).__name__
        )
        return False
    stored = await _store(
        sessions, user_id=user_id, session_id=session_id, summary=summary, read=read
    )
    log.info("memory.session_summarised", session_id=session_id, stored=stored)
    return stored


async def rebuild_stale_summaries(
    sessions: async_sessionmaker[AsyncSession],
    *,
    people: Sequence[tuple[int, str]],
    llm: ToolCaller | None,
) -> int:
    """Write again the summaries of these people's closed sessions that were dropped
    because words in them were forgotten or restored (`people`: user id and timezone),
    from what is visible now; returns how many were written. Each is tried once: after a
    model failure the session simply has no summary."""
    zones = dict(people)
    if llm is None or not zones:
        return 0
    async with sessions.begin() as db:
        stale = (
            await db.execute(
                update(SessionRow)
                .where(SessionRow.user_id.in_(list(zones)), SessionRow.summary_stale)
                .values(summary_stale=False)
                .returning(SessionRow.user_id, SessionRow.id)
            )
        ).all()
    written = 0
    for user_id, session_id in stale:
        written += await summarise_closed_session(
            sessions=sessions,
            user_id=user_id,
            session_id=session_id,
            llm=llm,
            timezone=zones[user_id],
        )
    return written
