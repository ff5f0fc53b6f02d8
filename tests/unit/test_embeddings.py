"""Embedders: WordLlama offline from the wheel, Voyage against a loopback fake of its API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from memory.recall.embeddings import (
    EmbeddingRejected,
    EmbeddingUnavailable,
    RecentEmbeddings,
    VoyageEmbedder,
    WordLlamaEmbedder,
    build_embedder,
    normalise_rows,
)


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    """One loaded model for the module."""
    return WordLlamaEmbedder(256)


async def test_wordllama_embeds_offline_as_unit_float32_rows(wordllama: WordLlamaEmbedder) -> None:
    vectors = await wordllama.embed(["I love hiking in the mountains", "", "ok"])
    assert vectors.shape == (3, 256)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert wordllama.name == "wordllama-l2_supercat-256"


async def test_similar_sentences_score_higher_than_unrelated_ones(
    wordllama: WordLlamaEmbedder,
) -> None:
    hiking, trekking, taxes = await wordllama.embed(
        [
            "I love hiking in the mountains",
            "We went trekking up a mountain trail",
            "My tax return is due next week",
        ]
    )
    assert float(hiking @ trekking) > float(hiking @ taxes) + 0.2


async def test_big_batches_match_small_ones(wordllama: WordLlamaEmbedder) -> None:
    texts = [f"sentence number {i} about gardening" for i in range(100)]
    big = await wordllama.embed(texts)
    small = await wordllama.embed(texts[:3])
    assert big.shape == (100, 256)
    assert np.allclose(big[:3], small, atol=1e-6)
    assert (await wordllama.embed([])).shape == (0, 256)


async def test_truncated_dimensions_are_supported_and_others_refused() -> None:
    small = WordLlamaEmbedder(64)
    assert (await small.embed(["hello"])).shape == (1, 64)
    with pytest.raises(ValueError, match=r"\[64, 128, 256\]"):
        WordLlamaEmbedder(512)


def test_normalise_rows_gives_empty_rows_a_unit_vector() -> None:
    rows = normalise_rows(np.array([[3.0, 4.0], [0.0, 0.0]]), 2)
    assert np.allclose(rows[0], [0.6, 0.8])
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)


def test_build_embedder_picks_the_provider() -> None:
    assert isinstance(build_embedder("wordllama", 128, None, "m"), WordLlamaEmbedder)
    voyage = build_embedder("voyage", 256, "key", "voyage-3.5-lite")
    assert isinstance(voyage, VoyageEmbedder) and voyage.dim == 256
    with pytest.raises(ValueError, match="VOYAGE_API_KEY"):
        build_embedder("voyage", 256, None, "voyage-3.5-lite")
    with pytest.raises(ValueError, match="unknown embedding provider"):
        build_embedder("word2vec", 256, None, "m")


class FakeVoyage:
    """A loopback stand-in for `POST /v1/embeddings`, recording what it was sent."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.authorization: list[str] = []
        self.status = 200
        self.width: int | None = None  # answer with this width instead of the one asked for

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.authorization.append(request.headers.get("Authorization", ""))
        if self.status != 200:
            return web.json_response({"detail": "Invalid model"}, status=self.status)
        dim = self.width or body["output_dimension"]
        data = [
            {"object": "embedding", "index": i, "embedding": [float(i + 1)] + [0.0] * (dim - 1)}
            for i in range(len(body["input"]))
        ]
        return web.json_response({"object": "list", "data": data[::-1], "model": body["model"]})


@pytest.fixture
async def voyage_api() -> AsyncIterator[tuple[FakeVoyage, str]]:
    """The fake served on a free loopback port."""
    fake = FakeVoyage()
    app = web.Application()
    app.router.add_post("/v1/embeddings", fake.embeddings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield fake, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_voyage_posts_the_texts_and_returns_unit_rows_in_order(
    voyage_api: tuple[FakeVoyage, str],
) -> None:
    fake, url = voyage_api
    embedder = VoyageEmbedder("secret", "voyage-3.5-lite", 8, base_url=url)
    try:
        vectors = await embedder.embed(["a", "b", "c"])
    finally:
        await embedder.aclose()
    assert vectors.shape == (3, 8) and vectors.dtype == np.float32
    assert np.allclose(vectors[:, 0], 1.0)
    assert fake.requests == [
        {"input": ["a", "b", "c"], "model": "voyage-3.5-lite", "output_dimension": 8}
    ]
    assert fake.authorization == ["Bearer secret"]


async def test_voyage_batches_large_inputs(voyage_api: tuple[FakeVoyage, str]) -> None:
    fake, url = voyage_api
    embedder = VoyageEmbedder("secret", "m", 4, base_url=url)
    try:
        vectors = await embedder.embed([f"t{i}" for i in range(300)])
    finally:
        await embedder.aclose()
    assert vectors.shape == (300, 4)
    assert [len(r["input"]) for r in fake.requests] == [128, 128, 44]


async def test_voyage_error_responses_raise_clear_errors(
    voyage_api: tuple[FakeVoyage, str],
) -> None:
    fake, url = voyage_api
    embedder = VoyageEmbedder("secret", "nope", 8, base_url=url)
    try:
        fake.status = 400
        with pytest.raises(EmbeddingRejected, match=r"HTTP 400.*Invalid model") as rejected:
            await embedder.embed(["a"])
        assert "secret" not in str(rejected.value)
        fake.status = 503
        with pytest.raises(EmbeddingUnavailable, match="HTTP 503"):
            await embedder.embed(["a"])
    finally:
        await embedder.aclose()


async def test_voyage_wrong_width_is_rejected(voyage_api: tuple[FakeVoyage, str]) -> None:
    fake, url = voyage_api
    fake.width = 512
    embedder = VoyageEmbedder("secret", "voyage-3-lite", 256, base_url=url)
    try:
        with pytest.raises(EmbeddingRejected, match="output_dimension 256"):
            await embedder.embed(["a"])
    finally:
        await embedder.aclose()


async def test_voyage_unreachable_is_unavailable() -> None:
    embedder = VoyageEmbedder("secret", "m", 8, base_url="http://127.0.0.1:9")
    try:
        with pytest.raises(EmbeddingUnavailable, match="unreachable"):
            await embedder.embed(["a"])
    finally:
        await embedder.aclose()


class CountingEmbedder:
    """WordLlama, recording which texts it was asked for."""

    def __init__(self, inner: WordLlamaEmbedder) -> None:
        self.inner = inner
        self.asked: list[list[str]] = []

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def name(self) -> str:
        return self.inner.name

    async def embed(self, texts: list[str]) -> Any:
        self.asked.append(list(texts))
        return await self.inner.embed(texts)


async def test_recent_vectors_are_kept_and_only_new_texts_are_embedded(
    wordllama: WordLlamaEmbedder,
) -> None:
    counting = CountingEmbedder(wordllama)
    recent = RecentEmbeddings(counting, size=2)
    first = await recent.embed(["my cat Pepper", "my dog Rex"])
    again = await recent.embed(["my dog Rex", "a parrot", "my dog Rex"])
    assert counting.asked == [["my cat Pepper", "my dog Rex"], ["a parrot"]]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[1])
    assert np.allclose(again[1], (await wordllama.embed(["a parrot"]))[0])
    await recent.embed(["my cat Pepper"])  # only two are kept: Pepper was dropped
    assert counting.asked[-1] == ["my cat Pepper"]
    assert (await recent.embed([])).shape == (0, 256)
    assert (recent.dim, recent.name) == (wordllama.dim, wordllama.name)
