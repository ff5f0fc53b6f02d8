"""Re-embedding after switching embedder: a WordLlama-made database (256 wide) moved to
the default MiniLM (384 wide): columns resized, every row embedded again."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memory.recall.embedder_identity import column_width, recorded_embedder, spec_of
from memory.recall.embeddings import WordLlamaEmbedder
from memory.recall.minilm import MiniLMEmbedder
from memory.recall.reembed import reembed
from memory.recall.retrieval import recall
from memory.store.conversations import SqlConversationStore
from memory.store.tables import Memory
from tests.conftest import FakeClock

WIDTH = 384  # what the session's migrated schema uses (MiniLM)
OLD_WIDTH = 256  # WordLlama, the default before MiniLM


@pytest.fixture
async def restore_width(engine: AsyncEngine) -> AsyncIterator[None]:
    """Put the vector columns back to the session's width for the tests that follow, and
    forget the embedder re-embedding recorded."""
    yield
    async with engine.begin() as conn:
        for table in ("messages", "memories"):
            await conn.exec_driver_sql(
                f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({WIDTH}) USING NULL"
            )
        await conn.exec_driver_sql("DELETE FROM embedder_identity")


async def test_switching_from_wordllama_to_minilm_reembeds_everything(
    db: async_sessionmaker[AsyncSession], clock: FakeClock, restore_width: None
) -> None:
    old = WordLlamaEmbedder(OLD_WIDTH)
    await reembed(db, old)  # an empty database made by WordLlama: 256-wide columns
    store = SqlConversationStore(db, old)
    for i, line in enumerate(["I adopted a kitten", "The kitten is called Miso", "   "]):
        inbound = await store.record_inbound(
            platform="console",
            platform_user_id="alice",
            chat_id="c",
            display_name="Alice",
            text=line,
            platform_message_id=str(i),
            now=clock.now() + timedelta(seconds=i),
            idle_gap=timedelta(minutes=30),
        )
    user_id = inbound.person.id
    async with db.begin() as s:
        s.add(
            Memory(
                user_id=user_id,
                short_id=1,
                tier="core",
                category="relationship",
                content="Has a kitten called Miso",
                content_hash=hashlib.sha256(b"miso").hexdigest(),
                importance=6,
                confidence=0.9,
                source="extracted",
                valid_from=clock.now(),
            )
        )

    new = MiniLMEmbedder()
    seen: list[tuple[int, int]] = []
    count = await reembed(
        db, new, batch_size=2, progress=lambda done, total: seen.append((done, total))
    )

    assert count == 3  # two messages with text and the memory; the blank message has none
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)
    async with db() as s:
        assert await column_width(s, "messages") == WIDTH
        assert await column_width(s, "memories") == WIDTH
        dims = (
            (
                await s.execute(
                    text(
                        "SELECT vector_dims(embedding) FROM messages WHERE btrim(content) <> '' "
                        "UNION ALL SELECT vector_dims(embedding) FROM memories"
                    )
                )
            )
            .scalars()
            .all()
        )
    assert dims == [WIDTH, WIDTH, WIDTH]
    assert await recorded_embedder(db) == spec_of(new)
    found = await recall(
        db, new, user_id=user_id, query="what's my cat's name?", k=2, now=clock.now()
    )
    assert found[0].content == "Has a kitten called Miso"

    assert await reembed(db, new) == 3  # same width: nothing resized, rows embedded again
