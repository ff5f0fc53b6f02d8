"""Importing chat history on real PostgreSQL: stored with original dates and authors,
only the person's words become memories, extraction resumes from its watermark, the
live conversation never sees the old chat, bad files store nothing, undo removes all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.chat_exports import ExportRejected
from bot.imports import Extracting, ImportConfig, estimate, read_export, run_batch, undo
from memory.care.repository import SqlMemoryRepository
from memory.recall.minilm import MiniLMEmbedder
from memory.store.conversations import SqlConversationStore
from memory.store.imports import choose_self, get_import, start_import
from memory.store.items import Candidate
from memory.store.records import Person
from memory.store.tables import Import, Memory, Message, User
from memory.store.tables import Session as SessionRow
from tests.conftest import FakeClock
from tests.fakes.llm import FakeToolCaller, ToolRequest
from tests.fakes.quoted import quoted_messages

DATA = Path(__file__).parents[1] / "data" / "imports"
Db = async_sessionmaker[AsyncSession]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


async def make_person(db: Db, clock: FakeClock) -> Person:
    async with db.begin() as session:
        user = User(display_name="Sam", timezone="Europe/Lisbon")
        session.add(user)
        await session.flush()
        return Person(user.id, "Sam", "Europe/Lisbon", None, None, None, False, True, clock.now())


def remember_person_lines(request: ToolRequest) -> dict[str, Any]:
    """A fast model that records each of THE PERSON's messages as a memory."""
    conversation = request.prompt.split("<conversation>", 1)[-1]
    found = [
        {
            "content": f"The person said: {quoted.text.strip()}",
            "category": "fact",
            "tier": "core",
            "importance": 6,
            "confidence": 0.9,
            "evidence_message_ids": [quoted.id],
        }
        for quoted in quoted_messages(conversation)
        if quoted.sender == "person"
    ]
    return {"memories": found}


async def stored(db: Db, user_id: int) -> list[tuple[str, str | None, str]]:
    async with db() as session:
        rows = await session.execute(
            select(Message.role, Message.author, Message.content)
            .where(Message.user_id == user_id)
            .order_by(Message.id)
        )
        return [tuple(row) for row in rows.all()]  # type: ignore[misc]


async def test_telegram_import_end_to_end(
    db: Db, clock: FakeClock, embedder: MiniLMEmbedder
) -> None:
    person = await make_person(db, clock)
    view = await read_export(
        DATA / "telegram_result.json",
        person=person,
        self_ids={"user111000111"},
        sessions=db,
        clock=clock,
        config=ImportConfig(),
    )
    assert (view.source, view.status, view.self_name) == ("telegram", "pending", "Sam Rivers")
    assert view.message_count == 4 and view.sessions == 2  # a day's pause splits them
    assert estimate(view, ImportConfig()).calls >= 2
    rows = await stored(db, person.id)
    assert [(r, a) for r, a, _ in rows] == [
        ("other", "Ana Lima"),
        ("user", "Sam Rivers"),
        ("other", "Ana Lima"),
        ("user", "Sam Rivers"),
    ]
    async with db() as session:
        first = await session.scalar(select(func.min(Message.created_at)))
    assert first is not None and first.year == 2024  # original dates

    llm = FakeToolCaller(default=remember_person_lines)
    deps = Extracting(db, SqlMemoryRepository(db, embedder, clock), llm, embedder, clock)
    assert await start_import(db, user_id=person.id, import_id=view.id, now=clock.now())
    view = await get_import(db, user_id=person.id, import_id=view.id)  # type: ignore[assignment]
    assert view is not None
    after_one = await run_batch(deps, view, timezone=person.timezone)
    assert after_one is not None and after_one.status == "running"
    assert 0 < after_one.extracted_count < 4  # resumable: the first session's watermark
    done = await run_batch(deps, after_one, timezone=person.timezone)
    assert done is not None and (done.status, done.extracted_count) == ("done", 4)
    prompts = "\n".join(r.prompt for r in llm.requests)
    assert 'from="other"' in prompts and 'from="companion"' not in prompts
    async with db() as session:
        contents = list(await session.scalars(select(Memory.content).order_by(Memory.id)))
    assert any("Crumb & Co" in c for c in contents) and any("Porto" in c for c in contents)
    assert not any("peanuts" in c for c in contents)  # Ana's words are context only

    async with db.begin() as session:
        live = SessionRow(user_id=person.id, started_at=clock.now(), last_message_at=clock.now())
        session.add(live)
        await session.flush()
        live_id = live.id
    history = await SqlConversationStore(db).history(
        user_id=person.id,
        session_id=live_id,
        after_id=None,
        chat_id=None,
        since=first,
        with_summaries=True,
    )
    assert history.earlier == [] and history.digests == []

    undone = await undo(db, user_id=person.id, import_id=view.id)
    assert undone is not None and (undone.messages, undone.memories) == (4, len(contents))
    assert await stored(db, person.id) == []
    async with db() as session:
        assert await session.scalar(select(func.count(Memory.id))) == 0
        assert await session.scalar(select(func.count(Import.id))) == 0
        assert await session.scalar(select(func.count(SessionRow.id))) == 1  # the live one


async def test_someone_elses_export_asks_who_they_are(
    db: Db, clock: FakeClock, embedder: MiniLMEmbedder
) -> None:
    person = await make_person(db, clock)
    view = await read_export(
        DATA / "hostile_result.json",
        person=person,
        self_ids={"user999"},
        sessions=db,
        clock=clock,
        config=ImportConfig(),
    )
    assert view.self_name is None
    assert not await start_import(db, user_id=person.id, import_id=view.id, now=clock.now())
    assert {p.name for p in view.participants} == {
        "Sam Rivers",
        "Eve <script>alert(1)</script> & <b>Friends</b>",
    }
    assert not await choose_self(db, user_id=person.id, import_id=view.id, name="Nobody")
    assert await choose_self(db, user_id=person.id, import_id=view.id, name="Sam Rivers")
    rows = await stored(db, person.id)
    assert [r for r, _, _ in rows] == ["other", "user", "other"]
    llm = FakeToolCaller(default=remember_person_lines)
    deps = Extracting(db, SqlMemoryRepository(db, embedder, clock), llm, embedder, clock)
    assert await start_import(db, user_id=person.id, import_id=view.id, now=clock.now())
    running = await get_import(db, user_id=person.id, import_id=view.id)
    assert running is not None
    await run_batch(deps, running, timezone=person.timezone)
    (request,) = llm.requests
    conversation = request.prompt.split("<conversation>\n", 1)[1]
    assert conversation.count("</conversation>") == 1  # the fake closing tag is inert
    async with db() as session:
        contents = list(await session.scalars(select(Memory.content)))
    assert contents and not any("administrator" in c or "hunter2" in c for c in contents)


@pytest.mark.parametrize("name", ["truncated", "encoding", "not_export", "empty"])
async def test_bad_files_store_nothing(db: Db, clock: FakeClock, tmp_path: Path, name: str) -> None:
    whole = (DATA / "telegram_result.json").read_bytes()
    content = {
        "truncated": whole[: len(whole) - 40],
        "encoding": whole.replace(b"Porto", b"Port\xff\xfe"),
        "not_export": b'{"participants": [], "messages": [{"content": "x"}]}',
        "empty": b"\n\n   \n",
    }[name]
    path = tmp_path / "upload"
    path.write_bytes(content)
    person = await make_person(db, clock)
    with pytest.raises(ExportRejected) as caught:
        await read_export(
            path, person=person, self_ids=(), sessions=db, clock=clock, config=ImportConfig()
        )
    assert caught.value.reason == name
    async with db() as session:
        assert await session.scalar(select(func.count(Message.id))) == 0
        assert await session.scalar(select(func.count(Import.id))) == 0
        assert await session.scalar(select(func.count(SessionRow.id))) == 0


async def test_undo_keeps_what_was_known_and_revives_what_the_import_replaced(
    db: Db, clock: FakeClock, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    person = await make_person(db, clock)
    repo = SqlMemoryRepository(db, embedder, clock)
    fact = Candidate("The person lives in Oslo with two cats", "identity", "core", 7, 0.9)
    oslo = await repo.add(person.id, fact, source="extracted", actor="extraction")
    known = Candidate("The person said: I keep bees on my roof", "fact", "core", 6, 0.9)
    bees = await repo.add(person.id, known, source="extracted", actor="extraction")
    path = tmp_path / "notes.txt"
    path.write_text("I keep bees on my roof\nI moved from Oslo to Bergen last spring\n")
    view = await read_export(
        path, person=person, self_ids=(), sessions=db, clock=clock, config=ImportConfig()
    )
    moved = {
        "content": "The person lives in Bergen with two cats",
        "category": "identity",
        "tier": "core",
        "importance": 7,
        "confidence": 0.9,
        "supersedes": oslo.label,
    }

    def answer(request: ToolRequest) -> dict[str, Any]:
        found = remember_person_lines(request)["memories"]
        ids = [m["evidence_message_ids"][0] for m in found]
        return {"memories": [found[0], {**moved, "evidence_message_ids": [ids[1]]}]}

    llm = FakeToolCaller(default=answer)
    deps = Extracting(db, repo, llm, embedder, clock)
    assert await start_import(db, user_id=person.id, import_id=view.id, now=clock.now())
    running = await get_import(db, user_id=person.id, import_id=view.id)
    assert running is not None
    done = await run_batch(deps, running, timezone=person.timezone)
    assert done is not None and done.status == "done"
    async with db() as session:
        live = set(
            await session.scalars(select(Memory.content).where(Memory.valid_until.is_(None)))
        )
    assert live == {bees.content, moved["content"]}  # bees known already: not again

    undone = await undo(db, user_id=person.id, import_id=view.id)
    assert undone is not None and undone.memories == 1
    async with db() as session:
        rows = (await session.execute(select(Memory.content, Memory.valid_until))).all()
    assert {(content, until) for content, until in rows} == {
        (oslo.content, None),
        (bees.content, None),
    }
