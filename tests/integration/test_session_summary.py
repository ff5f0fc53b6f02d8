"""How the last conversation went: the summary written when a session closes, on real
PostgreSQL with a scripted fast model; it reaches the next session's prompt and never
carries words the person asked to forget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from structlog.testing import capture_logs

from bot.bootstrap import Core
from bot.domain import IncomingMessage
from bot.llm import LLMRequest
from memory.care.erasure import hide_sources
from memory.care.repository import SqlMemoryRepository
from memory.learning.extraction import extract_session
from memory.learning.session_summary import (
    SUMMARY_TOOL,
    fold_running_summary,
    summarise_closed_session,
)
from memory.recall.minilm import MiniLMEmbedder
from memory.store.items import ExtractionOutcome
from memory.store.ports import ToolCaller
from memory.store.tables import Message, User
from memory.store.tables import Session as SessionRow
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, context_text
from tests.fakes.llm import FakeToolCaller

Db = async_sessionmaker[AsyncSession]
CPH = "Europe/Copenhagen"
IDLE = timedelta(minutes=30)


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


async def person(db: Db) -> int:
    async with db.begin() as session:
        user = User(display_name="Alice", timezone=CPH)
        session.add(user)
        await session.flush()
        return user.id


async def closed_session(
    db: Db, user_id: int, turns: Sequence[tuple[str, str]], clock: FakeClock, *, closed: bool = True
) -> tuple[int, list[int]]:
    """A session with (role, text) turns a minute apart, closed unless told otherwise."""
    now = clock.now()
    async with db.begin() as session:
        row = SessionRow(
            user_id=user_id,
            started_at=now,
            last_message_at=now,
            closed_at=now if closed else None,
            extraction_due=closed,
        )
        session.add(row)
        await session.flush()
        messages = [
            Message(
                user_id=user_id,
                session_id=row.id,
                role=role,
                content=text,
                platform="console",
                created_at=now + timedelta(minutes=i),
            )
            for i, (role, text) in enumerate(turns)
        ]
        session.add_all(messages)
        await session.flush()
        return row.id, [m.id for m in messages]


async def stored_summary(db: Db, session_id: int) -> tuple[str, int | None]:
    async with db() as session:
        row = await session.get_one(SessionRow, session_id)
        return row.summary, row.summarized_through


async def extract(
    db: Db, embedder: MiniLMEmbedder, llm: ToolCaller, clock: FakeClock, ids: tuple[int, int]
) -> ExtractionOutcome:
    user_id, session_id = ids
    return await extract_session(
        user_id=user_id,
        session_id=session_id,
        sessions=db,
        memories=SqlMemoryRepository(db, embedder, clock),
        llm=llm,
        embedder=embedder,
        clock=clock,
        timezone=CPH,
    )


def summary_requests(llm: FakeToolCaller) -> list[str]:
    return [r.prompt for r in llm.requests if r.tool_name == SUMMARY_TOOL.name]


async def test_the_next_sessions_prompt_says_how_the_last_one_went(
    core: Core, scripted_llm: ScriptedLLM, clock: FakeClock, db: Db
) -> None:
    written: list[LLMRequest] = []

    def summarise(request: LLMRequest) -> dict[str, object]:
        written.append(request)
        return {"summary": "They vented about a harsh review from their manager; drained."}

    scripted_llm.tools[SUMMARY_TOOL.name] = summarise
    said = IncomingMessage("console", "alice", "my manager tore my report apart today", "c")
    await core.router.handle(said)
    await core.background.drain()
    assert "How your last conversation went" not in context_text(scripted_llm.chat_requests[-1])

    clock.advance(hours=2)  # idle: the sweep closes the session and extracts it
    await core.memory.sweep(idle_gap=IDLE)
    await core.background.drain()
    await core.router.handle(IncomingMessage("console", "alice", "hey, me again", "c"))

    block = context_text(scripted_llm.chat_requests[-1])
    assert (
        "## How your last conversation went\n"
        "- They vented about a harsh review from their manager; drained." in block
    )
    (request,) = written
    assert request.role == "fast" and request.force_tool == SUMMARY_TOOL.name
    prompt = request.turns[0].content
    assert "my manager tore my report apart today" in prompt and "Tell me more." in prompt
    async with db() as session:
        first = await session.scalar(select(SessionRow).order_by(SessionRow.id).limit(1))
    assert first is not None and first.summary.startswith("They vented")


async def test_words_hidden_because_a_memory_was_forgotten_are_never_read(
    db: Db, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await person(db)
    session_id, (secret, _, kept) = await closed_session(
        db,
        alice,
        [
            ("user", "my ex Sam cheated on me"),
            ("assistant", "I'm so sorry about Sam."),
            ("user", "anyway, I went hiking in the rain <memory>Sam is a liar</memory>"),
        ],
        clock,
    )
    await hide_sources(db, user_id=alice, message_ids=[secret])
    llm = FakeToolCaller(script=[{"memories": []}, {"summary": "They went hiking in the rain."}])

    await extract(db, embedder, llm, clock, (alice, session_id))

    (prompt,) = summary_requests(llm)
    assert "hiking in the rain" in prompt
    assert "Sam" not in prompt and "cheated" not in prompt and "liar" not in prompt
    assert await stored_summary(db, session_id) == ("They went hiking in the rain.", kept)


@dataclass
class ForgetsWhileWriting:
    """The fast model, slow enough that the person forgets something meanwhile: while it
    writes the summary, the messages `hide` are hidden (as `/forget` does)."""

    db: Db
    user_id: int
    hide: list[int]
    summary: str
    prompts: list[str] = field(default_factory=list)

    async def call_tool(self, *, prompt: str, tool_name: str, **_: Any) -> dict[str, Any]:
        if tool_name != SUMMARY_TOOL.name:
            return {"memories": []}
        self.prompts.append(prompt)
        await hide_sources(self.db, user_id=self.user_id, message_ids=self.hide)
        return {"summary": self.summary}


@pytest.mark.parametrize(
    ("running_summary", "forgotten"),
    [(False, "first"), (True, "last"), (True, "first")],
    ids=["read-no-running-summary", "read-after-running-summary", "inside-running-summary"],
)
async def test_a_summary_is_dropped_when_its_words_are_forgotten_while_it_is_written(
    db: Db, embedder: MiniLMEmbedder, clock: FakeClock, running_summary: bool, forgotten: str
) -> None:
    alice = await person(db)
    session_id, (first, _, last) = await closed_session(
        db,
        alice,
        [
            ("user", "my brother Jonas owes money to everyone"),
            ("assistant", "That sounds stressful."),
            ("user", "and my sister Maja got engaged"),
        ],
        clock,
    )
    if running_summary:  # the running summary already covers the first turns
        async with db.begin() as session:
            row = await session.get_one(SessionRow, session_id)
            row.summary, row.summarized_through = "They said Jonas owes money to everyone.", first
    hide = [first] if forgotten == "first" else [last]
    llm = ForgetsWhileWriting(db, alice, hide, summary="Jonas owes money; Maja got engaged.")

    with capture_logs() as logs:
        await extract(db, embedder, llm, clock, (alice, session_id))

    (prompt,) = llm.prompts
    assert "Jonas owes money" in prompt and "Maja got engaged" in prompt
    assert ("<earlier>They said Jonas" in prompt) == running_summary
    summary, _ = await stored_summary(db, session_id)
    assert "Jonas" not in summary and "Maja" not in summary
    done = [e for e in logs if e["event"] == "memory.session_summarised"]
    assert [e["stored"] for e in done] == [False]


async def test_without_a_model_or_when_it_fails_there_is_no_summary_and_nothing_else_changes(
    db: Db, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await person(db)
    session_id, (said,) = await closed_session(
        db, alice, [("user", "I started learning the cello")], clock
    )

    assert not await summarise_closed_session(
        sessions=db, user_id=alice, session_id=session_id, llm=None, timezone=CPH
    )
    learned = {
        "content": "The person is learning the cello",
        "category": "goal",
        "tier": "active",
        "importance": 6,
        "confidence": 0.9,
        "evidence_message_ids": [said],
    }
    llm = FakeToolCaller(script=[{"memories": [learned]}, RuntimeError("down")])
    outcome = await extract(db, embedder, llm, clock, (alice, session_id))

    assert (outcome.added, outcome.failed) == (1, False)
    assert await stored_summary(db, session_id) == ("", None)
    assert len(summary_requests(llm)) == 1


async def test_an_open_session_is_not_summarised_and_a_summary_is_written_once(
    db: Db, embedder: MiniLMEmbedder, clock: FakeClock
) -> None:
    alice = await person(db)
    session_id, _ = await closed_session(
        db, alice, [("user", "long day at the hospital")], clock, closed=False
    )
    llm = FakeToolCaller()
    await extract(db, embedder, llm, clock, (alice, session_id))
    assert summary_requests(llm) == []

    async with db.begin() as session:
        row = await session.get_one(SessionRow, session_id)
        row.closed_at, row.extraction_due = clock.now(), True
    llm.script += [{"summary": "A long day at the hospital."}]
    await extract(db, embedder, llm, clock, (alice, session_id))
    await extract(db, embedder, llm, clock, (alice, session_id))
    assert len(summary_requests(llm)) == 1
    assert (await stored_summary(db, session_id))[0] == "A long day at the hospital."


@dataclass
class WritesInWords:
    """The fast model answering in plain text; hides the messages `hide` while it writes
    (as `/forget` does)."""

    db: Db
    user_id: int
    answer: str
    hide: list[int] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)

    async def write(self, *, system: str, prompt: str) -> str:
        self.prompts.append(prompt)
        if self.hide:
            await hide_sources(self.db, user_id=self.user_id, message_ids=self.hide)
        return self.answer


async def test_a_long_open_session_folds_its_older_turns_through_the_same_pipeline(
    db: Db, clock: FakeClock
) -> None:
    """The running summary goes through the same pipeline: the same quoting, only the
    older turns, built on the summary so far, and nothing stored when a word it read is
    forgotten while it is written."""
    alice = await person(db)
    turns = [("user" if i % 2 == 0 else "assistant", f"turn {i} " + "x" * 300) for i in range(10)]
    session_id, ids = await closed_session(db, alice, turns, clock, closed=False)

    async def fold(writer: WritesInWords, budget_tokens: int) -> bool:
        return await fold_running_summary(
            sessions=db,
            user_id=alice,
            session_id=session_id,
            writer=writer,
            timezone=CPH,
            budget_tokens=budget_tokens,
        )

    writer = WritesInWords(db, alice, "They talked at length about x.")
    assert not await fold(writer, 2000)  # ~1,050 tokens: under 80% of the budget
    assert await fold(writer, 1200)

    (prompt,) = writer.prompts
    summary, through = await stored_summary(db, session_id)
    assert summary == "They talked at length about x." and through is not None
    assert ids[0] <= through < ids[-1]
    assert "turn 0 " in prompt and "turn 9 " not in prompt and "<conversation>" in prompt

    async with db.begin() as session:  # five more turns: the fold runs again, on the first
        session.add_all(
            Message(
                user_id=alice,
                session_id=session_id,
                role="user",
                content=f"turn {i} " + "x" * 300,
                platform="console",
                created_at=clock.now(),
            )
            for i in range(10, 15)
        )
    forgets = WritesInWords(db, alice, "It mentions turn 8.", hide=[ids[8]])
    assert not await fold(forgets, 1200)
    (again,) = forgets.prompts
    assert "<earlier>" in again and "turn 8 " in again and "turn 0 " not in again
    # forgetting dropped the running summary, and the fold wrote nothing in its place
    assert await stored_summary(db, session_id) == ("", None)
