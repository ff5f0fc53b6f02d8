"""The embedder identity on real PostgreSQL: an empty database records the configured
embedder, another one is refused at start with a message naming the settings and the
re-embed command, and re-embedding records the new one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bot.bootstrap import build_core
from bot.config import Settings
from bot.errors import ConfigurationError
from memory.recall.embedder_identity import column_width, recorded_embedder
from memory.recall.embeddings import WordLlamaEmbedder
from memory.recall.reembed import reembed
from memory.store.errors import EmbedderSpec
from tests.fakes.chat_llm import ScriptedLLM

Db = async_sessionmaker[AsyncSession]
WIDTH = 384  # what the session's migrated schema uses
DEFAULT = EmbedderSpec("minilm-all-MiniLM-L6-v2-onnx-int8-384", 384)
WORDLLAMA = {"embedding_provider": "wordllama", "embedding_dim": 256}


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Any:
    """Settings for a core on the test database, with `changes` applied."""

    def make(**changes: Any) -> Settings:
        return Settings(database_url=database_url, data_dir=tmp_path, **changes)

    return make


async def start(settings: Settings) -> None:
    """Start a core and stop it again."""
    core = await build_core(settings, llm=ScriptedLLM())
    await core.aclose()


@pytest.fixture
async def restore_width(engine: AsyncEngine) -> AsyncIterator[None]:
    """Put the vector columns back to the session's width, and forget the record."""
    yield
    async with engine.begin() as conn:
        for table in ("messages", "memories"):
            await conn.exec_driver_sql(
                f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({WIDTH}) USING NULL"
            )
        await conn.exec_driver_sql("DELETE FROM embedder_identity")


async def test_an_empty_database_records_the_configured_embedder(db: Db, settings: Any) -> None:
    assert await recorded_embedder(db) is None

    await start(settings())
    assert await recorded_embedder(db) == DEFAULT

    await start(settings())  # the same embedder again: it starts, the record stays
    assert await recorded_embedder(db) == DEFAULT


@pytest.mark.parametrize(
    ("changes", "configured"),
    [
        (WORDLLAMA, "wordllama-l2_supercat-256 (256 dimensions)"),
        (
            {"embedding_provider": "voyage", "voyage_api_key": "pa-test-key"},
            "voyage-voyage-3.5-lite-384 (384 dimensions)",
        ),
    ],
    ids=["dimension", "provider"],
)
async def test_another_embedder_is_refused_naming_the_settings_and_the_reembed_command(
    db: Db, settings: Any, changes: dict[str, Any], configured: str
) -> None:
    await start(settings())

    with pytest.raises(ConfigurationError) as refused:
        await start(settings(**changes))

    message = str(refused.value)
    assert message.startswith("COMPANION_EMBEDDING_PROVIDER / COMPANION_EMBEDDING_DIM:")
    assert "minilm-all-MiniLM-L6-v2-onnx-int8-384 (384 dimensions)" in message
    assert configured in message
    assert "`companion memory reembed`" in message
    assert await recorded_embedder(db) == DEFAULT


async def test_reembedding_records_the_new_embedder_which_then_starts(
    db: Db, settings: Any, restore_width: None
) -> None:
    await start(settings())

    await reembed(db, WordLlamaEmbedder(256))

    assert await recorded_embedder(db) == EmbedderSpec("wordllama-l2_supercat-256", 256)
    await start(settings(**WORDLLAMA))
    with pytest.raises(ConfigurationError, match="companion memory reembed"):
        await start(settings())


async def test_a_database_without_a_record_is_checked_by_its_vector_width(
    db: Db, settings: Any
) -> None:
    async with db() as session:  # as migrated before the record existed
        assert await column_width(session, "memories") == WIDTH
    assert await recorded_embedder(db) is None

    with pytest.raises(ConfigurationError, match=r"an unrecorded embedder \(384 dimensions\)"):
        await start(settings(**WORDLLAMA))
    assert await recorded_embedder(db) is None

    await start(settings())
    assert await recorded_embedder(db) == DEFAULT
