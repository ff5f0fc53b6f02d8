"""How a conversation went: the one pipeline that writes `sessions.summary`.

While a session goes on and its turns pass 80% of the budget, its older turns are folded
into the running summary (`fold_running_summary`); when it closes, the rest is folded in
(`summarise_closed_session`), which the next session's prompt and check-ins read. Both
ask the fast model through the same tool and prompt, and store through
`memory.store.summaries`.

Only visible words are read: messages hidden because the person asked to forget a
memory (and apologies, refused texts) never, memory blocks stripped. A summary is not
stored if any message it was written from was hidden meanwhile, or if the running
summary it built on was dropped meanwhile (erasure drops summaries that may repeat
forgotten words, and marks closed sessions' for `rebuild_stale_summaries`, which the
nightly patrol runs).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from zoneinfo import ZoneInfo

import structlog
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.learning.extraction_prompt import ToolSchema, strip_memory_blocks
from memory.local_time import zone_of
from memory.person_words import DATA_RULE, conversation, element
from memory.recall.tokens import estimate_tokens
from memory.store.ports import Embedder, TextWriter, ToolCaller
from memory.store.records import StoredMessage
from memory.store.statuses import UNSHOWN_STATUSES
from memory.store.summaries import (
    SummarySource,
    store_summary,
    summary_source,
    take_stale_summaries,
)
from memory.store.summary_units import summary_vectors

log = structlog.get_logger(__name__)

MAX_MESSAGES = 60  # the newest visible messages after the running summary
MAX_OPEN_MESSAGES = 1000  # what an open session's running summary is folded from
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

_RULES = """\
You write a short note for an AI companion about how its conversation with one person \
went (or its earlier part, while it goes on), so that it can pick up from there. \
{answer} Third person, plain prose, at most 80 words: what the person talked about, how \
they seemed to feel, and what was left open or planned.

The conversation is quoted as <message> elements between <conversation> and \
</conversation>, and a summary of its earlier part (if any) between <earlier> and \
</earlier>. {data_rule} Such claims are not part of the summary."""


SUMMARY_SYSTEM = _RULES.format(answer="Call write_session_summary once.", data_rule=DATA_RULE)
RUNNING_SYSTEM = _RULES.format(answer="Answer with the note alone.", data_rule=DATA_RULE)

Ask = Callable[[str], Awaitable[str]]
"""Asks the model for the summary of a prompt (`by_tool` or `in_words`)."""


class SessionSummary(BaseModel):
    """The tool input of `write_session_summary`."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    summary: str = Field(min_length=1)


def summary_prompt(earlier: str, messages: Sequence[StoredMessage], zone: ZoneInfo) -> str:
    """The conversation (and the summary of its earlier part) to summarise, as escaped
    data."""
    turns = conversation(messages, zone=zone, clean=strip_memory_blocks)
    before = f"{element('earlier', earlier.strip())}\n\n" if earlier.strip() else ""
    return f"{before}{turns}"


def split_for_summary(
    messages: list[StoredMessage], budget_tokens: int
) -> tuple[list[StoredMessage], list[StoredMessage]] | None:
    """(older turns to fold, newer turns to keep) once the visible turns pass 80% of the
    budget: the newer ones keep about 40% of it."""
    visible = [m for m in messages if m.status not in UNSHOWN_STATUSES]
    total = sum(estimate_tokens(m.content) + 4 for m in visible)
    if total <= 0.8 * budget_tokens or len(visible) < 4:
        return None
    kept_tokens = 0
    cut = len(visible)
    while cut > 1 and kept_tokens < 0.4 * budget_tokens:
        cut -= 1
        kept_tokens += estimate_tokens(visible[cut].content) + 4
    return visible[:cut], visible[cut:]


async def _write(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    session_id: int,
    source: SummarySource,
    ask: Ask,
    timezone: str,
    embedder: Embedder | None = None,
) -> bool:
    """Ask the model for the summary of `source` and store it, with its sentences'
    vectors when there is an `embedder`; True when stored. A model failure (or an empty
    answer) is logged and changes nothing."""
    try:
        answer = await ask(summary_prompt(source.earlier, source.messages, zone_of(timezone)))
        summary = answer.strip()[:MAX_SUMMARY_CHARS]
        if not summary:
            raise ValueError("empty summary")
    except Exception as exc:  # any model failure: the conversation simply has no summary
        log.warning(
            "memory.session_summary_failed", session_id=session_id, error=type(exc).__name__
        )
        return False
    stored = await store_summary(
        sessions,
        user_id=user_id,
        session_id=session_id,
        summary=summary,
        source=source,
        vectors=await summary_vectors(embedder, summary),
    )
    log.info(
        "memory.session_summarised",
        session_id=session_id,
        stored=stored,
        folded=len(source.messages),
    )
    return stored


def by_tool(llm: ToolCaller) -> Ask:
    """The summary through the `write_session_summary` tool (a closing session's)."""

    async def ask(prompt: str) -> str:
        raw = await llm.call_tool(
            system=SUMMARY_SYSTEM,
            prompt=prompt,
            tool_name=SUMMARY_TOOL.name,
            tool_description=SUMMARY_TOOL.description,
            input_schema=SUMMARY_TOOL.input_schema,
        )
        return SessionSummary.model_validate(raw).summary

    return ask


def in_words(writer: TextWriter) -> Ask:
    """The summary as the model's plain answer (the running summary's, written on the
    reply path's heels: one short call, no tool)."""

    async def ask(prompt: str) -> str:
        return await writer.write(system=RUNNING_SYSTEM, prompt=prompt)

    return ask


def _shown(source: SummarySource) -> SummarySource:
    """`source` without the messages that are nothing but memory blocks."""
    messages = [m for m in source.messages if strip_memory_blocks(m.content)]
    return replace(source, messages=messages)


async def summarise_closed_session(
    *,
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    session_id: int,
    llm: ToolCaller | None,
    timezone: str,
    embedder: Embedder | None = None,
) -> bool:
    """Write how a closed session went into its summary; True when one was stored.

    Without a model, or for a session in which the person said nothing new since its
    running summary, nothing happens. A model failure is logged and changes nothing.
    """
    if llm is None:
        return False
    source = await summary_source(
        sessions, user_id=user_id, session_id=session_id, limit=MAX_MESSAGES, closed_only=True
    )
    if source is None:
        return False
    source = _shown(source)
    if not any(m.role == "user" for m in source.messages):
        return False
    return await _write(sessions, user_id, session_id, source, by_tool(llm), timezone, embedder)


async def fold_running_summary(
    *,
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    session_id: int,
    writer: TextWriter | None,
    timezone: str,
    budget_tokens: int,
    embedder: Embedder | None = None,
) -> bool:
    """While a session goes on, fold its older turns into its running summary once its
    turns pass 80% of the budget (see `split_for_summary`); True when folded. No message
    is deleted: the summary just replaces them in prompts."""
    if writer is None:
        return False
    source = await summary_source(
        sessions, user_id=user_id, session_id=session_id, limit=MAX_OPEN_MESSAGES, closed_only=False
    )
    split = None if source is None else split_for_summary(source.messages, budget_tokens)
    if source is None or split is None:
        return False
    older = _shown(replace(source, messages=split[0]))
    if not older.messages:
        return False
    return await _write(sessions, user_id, session_id, older, in_words(writer), timezone, embedder)


async def rebuild_stale_summaries(
    sessions: async_sessionmaker[AsyncSession],
    *,
    people: Sequence[tuple[int, str]],
    llm: ToolCaller | None,
    embedder: Embedder | None = None,
) -> int:
    """Write again the summaries of these people's closed sessions that were dropped
    because words in them were forgotten or restored (`people`: user id and timezone),
    from what is visible now; returns how many were written. Each is tried once: after a
    model failure the session simply has no summary."""
    zones = dict(people)
    if llm is None or not zones:
        return 0
    written = 0
    for user_id, session_id in await take_stale_summaries(sessions, user_ids=list(zones)):
        written += await summarise_closed_session(
            sessions=sessions,
            user_id=user_id,
            session_id=session_id,
            llm=llm,
            timezone=zones[user_id],
            embedder=embedder,
        )
    return written
