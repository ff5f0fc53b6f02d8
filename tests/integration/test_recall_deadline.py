"""Recall never costs a reply, and recall where it helps: through the whole core on real
PostgreSQL with a scripted model. Faults are real ones: a recall statement PostgreSQL
rejects, a table another transaction holds locked, an embedder that hangs or is down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from adapters.stats import stats_report
from bot import metrics
from bot.bootstrap import Core, build_core
from bot.config import Settings
from bot.conversation import Conversation, handle_message
from bot.domain import IncomingMessage, Reply
from bot.llm import ToolCall, ToolSpec
from bot.prompting import MemoryContext, TurnWindow
from memory.recall.context import ALONG, DIARY, RELEVANT
from memory.recall.embeddings import EmbeddingUnavailable
from memory.recall.minilm import MiniLMEmbedder
from memory.store.database import async_url
from memory.store.items import Candidate
from memory.store.ports import Vector
from memory.store.records import ConversationSession, Inbound, Person
from memory.store.tables import DiaryEntry, Memory, MemoryEvent, Message, Thread, User
from tests.conftest import FakeClock
from tests.fakes.chat_llm import ScriptedLLM, context_text

DEADLINE_MS = 2000  # roomy: two shared cores; the faults below never finish at all


@dataclass
class ControlledEmbedder:
    """The real embedder, which can be told to hang on its `n`th call, or fail from it on."""

    real: MiniLMEmbedder = field(default_factory=MiniLMEmbedder)
    calls: int = 0
    hang_at: int | None = None
    fail_from: int | None = None
    hung: int = 0

    @property
    def dim(self) -> int:
        return self.real.dim

    @property
    def name(self) -> str:
        return self.real.name

    async def embed(self, texts: list[str]) -> Vector:
        self.calls += 1
        if self.fail_from is not None and self.calls >= self.fail_from:
            raise EmbeddingUnavailable("provider answered 503")
        if self.calls == self.hang_at:
            self.hung += 1
            await asyncio.Event().wait()  # never set: only the deadline ends this
        return await self.real.embed(texts)

    def next_call_hangs(self, *, after: int = 0) -> None:
        """The call after the next `after` ones hangs (a turn embeds its message, then
        its recall query, then its reply)."""
        self.hang_at = self.calls + after + 1


@pytest.fixture
def embedder() -> ControlledEmbedder:
    return ControlledEmbedder()


@pytest.fixture
async def core(
    database_url: str,
    db: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
    clock: FakeClock,
    tmp_path: Path,
    embedder: ControlledEmbedder,
) -> AsyncIterator[Core]:
    settings = Settings(
        database_url=database_url, data_dir=tmp_path, recall_deadline_ms=DEADLINE_MS
    )
    built = await build_core(settings, llm=scripted_llm, clock=clock, embedder=embedder)
    yield built
    await built.aclose()


def says(text: str, user: str = "alice") -> IncomingMessage:
    return IncomingMessage("console", user, text, chat_id=f"chat-{user}", display_name=user)


async def _turn(core: Core, words: str) -> str:
    reply = await core.router.handle(says(words))
    await core.background.drain()
    return reply.text


async def _alice(core: Core, db: async_sessionmaker[AsyncSession]) -> int:
    """Alice, known to the companion after a first message, with two core facts."""
    await _turn(core, "hello there, nice to meet you")
    async with db() as s:
        user_id = int(await s.scalar(select(User.id)) or 0)
    for content in ("The person works as a nurse", "The person has a dog called Biscuit"):
        await core.memories.add(
            user_id, Candidate(content, "fact", "core", 7, 0.9), source="user", actor="user"
        )
    return user_id


async def _past_event(
    core: Core, user_id: int, content: str, days_ago: int, thread_id: int | None = None
) -> int:
    """A recall-only memory: an event long enough ago to have left the standing block."""
    when = core.clock.now() - timedelta(days=days_ago)
    item = await core.memories.add(
        user_id,
        Candidate(content, "event", "active", 6, 0.9, event_at=when, thread_id=thread_id),
        source="user",
        actor="user",
    )
    return item.id


def _degraded(reason: str) -> float:
    value = metrics.REGISTRY.get_sample_value("companion_degraded_turns_total", {"reason": reason})
    return value or 0.0


async def _last_reply(db: async_sessionmaker[AsyncSession]) -> Message:
    async with db() as s:
        row = await s.scalar(
            select(Message).where(Message.role == "assistant").order_by(Message.id.desc())
        )
    assert row is not None
    return row


async def test_a_recall_statement_postgres_rejects_still_answers_with_the_standing_block(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], database_url: str
) -> None:
    user_id = await _alice(core, db)
    await _past_event(core, user_id, "The person ran the Copenhagen half marathon", 20)
    before = _degraded("recall_error")
    admin = create_async_engine(async_url(database_url))
    try:
        # Recall ranks memories by their words (memories.tsv); the standing reads never
        # touch that column. Without it, PostgreSQL rejects the recall statement.
        async with admin.begin() as conn:
            await conn.execute(text("ALTER TABLE memories RENAME COLUMN tsv TO tsv_away"))
        reply = await _turn(core, "How did the Copenhagen half marathon go?")
    finally:
        async with admin.begin() as conn:
            await conn.execute(text("ALTER TABLE memories RENAME COLUMN tsv_away TO tsv"))
        await admin.dispose()
    assert reply == "Tell me more."
    block = context_text(scripted_llm.chat_requests[-1])
    assert "works as a nurse" in block and "dog called Biscuit" in block
    assert "half marathon" not in block.replace("How did the Copenhagen half marathon", "")
    assert _degraded("recall_error") == before + 1
    stored = await _last_reply(db)
    assert stored.content == "Tell me more." and stored.degraded == "recall_error"
    # Once PostgreSQL accepts it again, recall is back.
    await _turn(core, "How did the Copenhagen half marathon go?")
    assert "ran the Copenhagen half marathon" in context_text(scripted_llm.chat_requests[-1])
    assert (await _last_reply(db)).degraded is None


async def test_a_locked_memory_table_times_out_and_the_turns_alone_answer(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], database_url: str
) -> None:
    await _alice(core, db)
    before = _degraded("context_timeout")
    admin = create_async_engine(async_url(database_url))
    try:
        async with admin.connect() as conn:
            transaction = await conn.begin()
            await conn.execute(text("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE"))
            started = asyncio.get_running_loop().time()
            reply = await core.router.handle(says("Guess what happened at work today"))
            waited = asyncio.get_running_loop().time() - started
            await transaction.rollback()
    finally:
        await admin.dispose()
    await core.background.drain()
    assert reply.text == "Tell me more."
    request = scripted_llm.chat_requests[-1]
    assert request.standing_system == "" and "<memory>" not in request.turn_context
    assert request.turns[-1].content == "Guess what happened at work today"
    assert _degraded("context_timeout") == before + 1
    assert (await _last_reply(db)).degraded == "context_timeout"
    assert waited < DEADLINE_MS / 1000 + 3  # bounded by the deadline, not by the lock
    # The lock gone, the memory is back.
    await _turn(core, "Anyway, how are you?")
    assert "works as a nurse" in context_text(scripted_llm.chat_requests[-1])


async def test_a_hanging_embedder_times_out_recall_and_keeps_the_standing_block(
    core: Core,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
    embedder: ControlledEmbedder,
) -> None:
    await _alice(core, db)
    before = _degraded("recall_timeout")
    embedder.next_call_hangs(after=1)  # the message's own vector comes; the query's hangs
    reply = await _turn(core, "Do you remember what my dog did last spring?")
    assert reply == "Tell me more."
    assert embedder.hung == 1
    block = context_text(scripted_llm.chat_requests[-1])
    assert "works as a nurse" in block and "dog called Biscuit" in block
    assert _degraded("recall_timeout") == before + 1
    assert (await _last_reply(db)).degraded == "recall_timeout"


async def test_an_embedder_that_is_down_still_answers_and_recalls_by_words(
    core: Core,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
    embedder: ControlledEmbedder,
) -> None:
    user_id = await _alice(core, db)
    await _past_event(core, user_id, "The person ran the Copenhagen half marathon", 20)
    embedder.fail_from = embedder.calls + 1
    reply = await _turn(core, "How did the Copenhagen half marathon go?")
    assert reply == "Tell me more."
    assert "ran the Copenhagen half marathon" in context_text(scripted_llm.chat_requests[-1])
    assert (await _last_reply(db)).degraded is None


async def test_a_reply_records_what_its_memory_block_cost(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await _alice(core, db)
    await _past_event(core, user_id, "The person ran the Copenhagen half marathon", 20)
    await _turn(core, "How did the Copenhagen half marathon go?")
    stored = await _last_reply(db)
    assert stored.memory_tokens is not None and stored.memory_tokens > 20
    assert stored.recalled is not None and stored.recalled >= 1
    assert stored.memory_cut is False and stored.degraded is None


async def test_an_acknowledgement_skips_recall_and_a_question_about_the_past_gets_it(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await _alice(core, db)
    await _past_event(core, user_id, "The person ran the Copenhagen half marathon", 20)
    skips = metrics.REGISTRY.get_sample_value("companion_recalled_items_count", {"need": "skip"})
    await _turn(core, "ok thanks 👍")
    block = context_text(scripted_llm.chat_requests[-1])
    assert "works as a nurse" in block and f"## {RELEVANT}" not in block
    assert (await _last_reply(db)).recalled == 0
    after = metrics.REGISTRY.get_sample_value("companion_recalled_items_count", {"need": "skip"})
    assert (after or 0) == (skips or 0) + 1
    await _turn(core, "Do you remember the half marathon?")
    block = context_text(scripted_llm.chat_requests[-1])
    assert f"## {RELEVANT}" in block and "ran the Copenhagen half marathon" in block


async def test_a_recalled_step_of_a_thread_brings_the_thread_s_newest_items(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await _alice(core, db)
    async with db.begin() as s:
        thread = Thread(user_id=user_id, title="Moving to Aarhus")
        s.add(thread)
        await s.flush()
        thread_id = thread.id
    await _past_event(
        core, user_id, "The person signed the lease on a flat in Aarhus", 30, thread_id=thread_id
    )
    await _past_event(
        core, user_id, "The person bought a blue cargo bicycle", 9, thread_id=thread_id
    )
    await _past_event(core, user_id, "The person painted the kitchen yellow", 12)
    await _turn(core, "Do you remember the lease on the Aarhus flat?")
    block = context_text(scripted_llm.chat_requests[-1])
    relevant = block.split(f"## {RELEVANT}")[1]
    assert "signed the lease on a flat in Aarhus" in relevant.split(f"## {ALONG}")[0]
    assert f"## {ALONG}" in block
    assert "bought a blue cargo bicycle" in block.split(f"## {ALONG}")[1]
    assert "kitchen yellow" not in block.split(f"## {ALONG}")[1]


async def test_the_last_seven_days_of_the_diary_stand_in_the_cached_part(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], clock: FakeClock
) -> None:
    user_id = await _alice(core, db)
    today = clock.now().date()  # UTC, the person's timezone
    async with db.begin() as s:
        for back in range(1, 10):
            day = today - timedelta(days=back)
            s.add(
                DiaryEntry(
                    user_id=user_id,
                    local_date=day,
                    lines=[f"Diary line of {day:%d %b}: a walk by the lakes"],
                    notes_to_self=[],
                    source_message_ids=[],
                    created_at=clock.now() - timedelta(days=back - 1),
                )
            )
    await _turn(core, "I had a long day")
    first = scripted_llm.chat_requests[-1]
    await _turn(core, "and now I am tired")
    second = scripted_llm.chat_requests[-1]
    assert f"## {DIARY}" in first.standing_system
    shown = [today - timedelta(days=back) for back in range(1, 8)]
    for day in shown:
        assert f"Diary line of {day:%d %b}" in first.standing_system
    for day in (today - timedelta(days=8), today - timedelta(days=9)):
        assert f"Diary line of {day:%d %b}" not in context_text(first)
    assert _order(first.standing_system, shown[::-1])
    assert second.standing_system == first.standing_system  # the cached prefix holds


def _order(textual: str, days: list[date]) -> bool:
    places = [textual.index(f"Diary line of {day:%d %b}") for day in days]
    return places == sorted(places)


class BrokenGateway:
    """A memory gateway whose context assembly fails outright (a bug, a bad row)."""

    tools: tuple[ToolSpec, ...] = ()

    async def context_for(
        self, person: Person, session: ConversationSession, query: str
    ) -> MemoryContext:
        raise ValueError("a row no one expected")

    async def run_tool(self, person: Person, message_id: int, call: ToolCall) -> str:
        raise AssertionError("no tools are offered")

    def after_turn(self, person: Person, inbound: Inbound, window: TurnWindow) -> None:
        pass

    async def with_turn_notice(self, person: Person, message_id: int, reply: Reply) -> Reply:
        return reply

    def turn_over(self, person: Person, message_id: int) -> None:
        pass


async def test_a_memory_gateway_that_fails_outright_costs_no_reply(
    conversation: Conversation, llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    before = _degraded("context_error")
    broken = replace(conversation, memory=BrokenGateway())
    reply = await handle_message(says("Guess what happened at work today"), conversation=broken)
    assert reply.text == "Tell me more."
    request = llm.chat_requests[-1]
    assert request.standing_system == "" and "<memory>" not in request.turn_context
    assert _degraded("context_error") == before + 1
    stored = await _last_reply(db)
    assert stored.degraded == "context_error" and stored.memory_tokens == 0


async def test_companion_stats_reports_the_memory_of_prompts(
    core: Core,
    scripted_llm: ScriptedLLM,
    db: async_sessionmaker[AsyncSession],
    embedder: ControlledEmbedder,
    clock: FakeClock,
) -> None:
    user_id = await _alice(core, db)  # one turn: recall found nothing to show
    await _past_event(core, user_id, "The person ran the Copenhagen half marathon", 20)
    await _turn(core, "How did the Copenhagen half marathon go?")  # recalls it
    embedder.next_call_hangs(after=1)
    await _turn(core, "Do you remember the marathon?")  # recall times out
    unsure = await core.memories.add(
        user_id,
        Candidate("The person may have a dog", "fact", "core", 4, 0.5),
        source="extracted",
        actor="extraction",
    )
    async with db.begin() as s:
        await s.execute(update(Memory).where(Memory.id == unsure.id).values(unsure=True))
        outcomes = [
            ("ask", {}),
            ("ask", {}),
            ("affirm", {"was_unsure": True}),
            ("affirm", {"was_unsure": False}),  # a sure memory affirmed: not counted
            ("forget", {}),
        ]
        for action, details in outcomes:
            s.add(
                MemoryEvent(
                    user_id=user_id,
                    memory_id=unsure.id,
                    action=action,
                    actor="user",
                    details=details,
                    created_at=clock.now(),
                )
            )
    report = await stats_report(core.sessions, clock.now())
    lines = report.splitlines()
    assert _row(lines, "prompts with memory") == ["3", "3"]
    assert _row(lines, "degraded turns") == ["1", "1"]
    assert _row(lines, "recall_timeout") == ["1", "1"]
    assert _row(lines, "unsure asked") == ["2", "2"]
    assert _row(lines, "unsure confirmed") == ["1", "1"]
    assert _row(lines, "unsure rejected") == ["1", "1"]
    assert _row(lines, "cut by the memory budget") == ["0", "0"]
    recalled = float(_row(lines, "recalled items per prompt")[0])
    assert 0 < recalled < 3
    async with db() as s:
        mean = await s.scalar(
            select(func.avg(Message.memory_tokens)).where(Message.memory_tokens.is_not(None))
        )
    assert _row(lines, "memory tokens per prompt") == [f"{float(mean):,.2f}"] * 2
    assert "marathon" not in report


def _row(lines: list[str], label: str) -> list[str]:
    leading = label.split()
    for line in lines:
        cells = line.split()
        if cells[: len(leading)] == leading:
            return cells[len(leading) :]
    raise AssertionError(f"no row {label!r} in:\n" + "\n".join(lines))


async def test_a_continuation_recalls_a_few_and_a_question_about_the_past_many(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await _alice(core, db)
    for n, place in enumerate(("Aarhus", "Odense", "Aalborg", "Esbjerg", "Roskilde", "Vejle")):
        await _past_event(core, user_id, f"The person ran the {place} marathon", 20 + n)
    await _turn(core, "and the marathon in Odense")
    assert (await _last_reply(db)).recalled == 3
    await _turn(core, "Do you remember all the marathons I ran?")
    assert ((await _last_reply(db)).recalled or 0) >= 6
    block = context_text(scripted_llm.chat_requests[-1]).split(f"## {RELEVANT}")[1]
    assert all(
        f"ran the {place} marathon" in block
        for place in ("Aarhus", "Odense", "Aalborg", "Esbjerg", "Roskilde", "Vejle")
    )


async def test_a_standing_read_postgres_rejects_leaves_the_turns_alone(
    core: Core, scripted_llm: ScriptedLLM, db: async_sessionmaker[AsyncSession], database_url: str
) -> None:
    await _alice(core, db)
    before = _degraded("context_error")
    admin = create_async_engine(async_url(database_url))
    try:
        # The standing reads take the diary's week (diary_entries.lines); recall does not.
        async with admin.begin() as conn:
            await conn.execute(text("ALTER TABLE diary_entries RENAME COLUMN lines TO lines_away"))
        reply = await _turn(core, "Guess what happened at work today")
    finally:
        async with admin.begin() as conn:
            await conn.execute(text("ALTER TABLE diary_entries RENAME COLUMN lines_away TO lines"))
        await admin.dispose()
    assert reply == "Tell me more."
    request = scripted_llm.chat_requests[-1]
    assert request.standing_system == "" and "<memory>" not in request.turn_context
    assert _degraded("context_error") == before + 1
    assert (await _last_reply(db)).degraded == "context_error"
