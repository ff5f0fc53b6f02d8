"""Embedders: WordLlama (offline static word vectors, selectable) and Voyage (hosted,
optional); the default MiniLM (`memory.recall.minilm`) and the OpenAI-compatible one
(`memory.recall.openai_embeddings`) are built here too.

All satisfy the `Embedder` port: `await embed(texts)` returns one L2-normalised
float32 row per text. Errors a caller may meet are drawn here:

    EmbeddingError(RuntimeError)      the provider could not embed
    ├── EmbeddingUnavailable          network trouble, rate limit, 5xx: try again later
    └── EmbeddingRejected             the request or the response is wrong: fix config
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import structlog

from memory.store.ports import Embedder, Vector
from memory.store.ports import EmbeddingError as EmbeddingError  # the port's, re-exported

log = structlog.get_logger(__name__)

WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_WEIGHTS_DIM = 256  # the only weights file the wheel ships
WORDLLAMA_DIMS = (64, 128, 256)  # Matryoshka truncations of the shipped weights
INLINE_BATCH = 64  # larger batches are embedded in a worker thread
VOYAGE_URL = "https://api.voyageai.com"
HOSTED_BATCH = 128  # texts a request to a hosted provider


class EmbeddingUnavailable(EmbeddingError):
    """The provider is unreachable, rate-limited or failing: try again later."""


class EmbeddingRejected(EmbeddingError):
    """The provider refused the request or answered nonsense: check the configuration."""


def normalise_rows(matrix: Any, dim: int) -> Vector:
    """Rows as unit-length float32; an all-zero row (no tokens) becomes a fixed unit vector."""
    rows = np.asarray(matrix, dtype=np.float32).reshape(-1, dim)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    empty = norms[:, 0] == 0.0
    rows = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0.0)
    rows[empty] = np.float32(1.0 / np.sqrt(dim))
    unit: Vector = rows
    return unit


def _import_wordllama() -> Any:
    """Import wordllama, undoing the `logging.basicConfig` it runs at import time."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    from wordllama import WordLlama

    root.handlers[:] = handlers
    root.setLevel(level)
    return WordLlama


class WordLlamaEmbedder:
    """WordLlama static embeddings from the weights inside the installed wheel; no network."""

    def __init__(self, dim: int = 256) -> None:
        if dim not in WORDLLAMA_DIMS:
            raise ValueError(
                f"WordLlama supports embedding dimensions {list(WORDLLAMA_DIMS)} "
                f"(truncations of the shipped {WORDLLAMA_WEIGHTS_DIM}-d weights), not {dim}"
            )
        self._dim = dim
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Vector width."""
        return self._dim

    @property
    def name(self) -> str:
        """Provider, model and width, e.g. `wordllama-l2_supercat-256`."""
        return f"wordllama-{WORDLLAMA_CONFIG}-{self._dim}"

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                word_llama = _import_wordllama()
                package = Path(_package_folder())
                self._model = word_llama.load(
                    config=WORDLLAMA_CONFIG,
                    cache_dir=package,
                    disable_download=True,
                    dim=WORDLLAMA_WEIGHTS_DIM,
                    trunc_dim=None if self._dim == WORDLLAMA_WEIGHTS_DIM else self._dim,
                )
                log.info("embeddings.loaded", model=self.name)
            return self._model

    def embed_sync(self, texts: list[str]) -> Vector:
        """Embed in the calling thread (CPU only, about 20 µs per text)."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        raw = self._loaded().embed(texts, norm=False)
        return normalise_rows(raw, self._dim)

    async def embed(self, texts: list[str]) -> Vector:
        """One unit row per text; big batches and the first load run in a worker thread."""
        if self._model is None or len(texts) > INLINE_BATCH:
            return await asyncio.to_thread(self.embed_sync, texts)
        return self.embed_sync(texts)


def _package_folder() -> str:
    import wordllama

    return str(Path(wordllama.__file__).parent)


class HostedEmbedder:
    """What the hosted embedders share: the width, one HTTP connection pool, batches of
    `batch` texts a request (`_batch`, each provider's own), unit rows."""

    batch = HOSTED_BATCH
    _dim: int
    _session: aiohttp.ClientSession | None

    @property
    def dim(self) -> int:
        """Vector width."""
        return self._dim

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def embed(self, texts: list[str]) -> Vector:
        """One unit row per text, in batches of at most `batch` per request."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        size = self.batch
        parts = [await self._batch(texts[i : i + size]) for i in range(0, len(texts), size)]
        return normalise_rows(np.concatenate(parts), self._dim)

    async def _batch(self, texts: list[str]) -> Vector:
        """One request's rows; each hosted provider says how it asks."""
        raise NotImplementedError


def embedding_rows(payload: Any, provider: str) -> Vector:
    """The `data[].embedding` rows of an embeddings answer, in `index` order."""
    try:
        items = sorted(payload["data"], key=lambda item: int(item["index"]))
        rows: Vector = np.asarray([item["embedding"] for item in items], dtype=np.float32)
    except (KeyError, TypeError, ValueError) as exc:
        raise EmbeddingRejected(f"{provider} answered with an unexpected body") from exc
    return rows


class VoyageEmbedder(HostedEmbedder):
    """Voyage AI embeddings over HTTPS (`POST /v1/embeddings`)."""

    def __init__(
        self,
        api_key: str,
        model: str,
        dim: int,
        base_url: str = VOYAGE_URL,
        *,
        timeout_seconds: float = 30.0,
    ) -> None:
        self._api_key = api_key
        self._model = model
        self._dim = dim
        self._url = base_url.rstrip("/") + "/v1/embeddings"
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    @property
    def name(self) -> str:
        """Provider, model and width, e.g. `voyage-voyage-3.5-lite-256`."""
        return f"voyage-{self._model}-{self._dim}"

    async def _batch(self, texts: list[str]) -> Vector:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        body = {"input": texts, "model": self._model, "output_dimension": self._dim}
        headers = {"Authorization": f"Bearer {self._api_key}"}
        try:
            async with self._session.post(self._url, json=body, headers=headers) as response:
                if response.status >= 400:
                    raise _http_error(response.status, await response.text())
                payload = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("embeddings.voyage_unreachable", error=type(exc).__name__)
            raise EmbeddingUnavailable(f"Voyage is unreachable: {type(exc).__name__}") from exc
        return self._parse(payload, len(texts))

    def _parse(self, payload: Any, expected: int) -> Vector:
        matrix = embedding_rows(payload, "Voyage")
        if matrix.shape != (expected, self._dim):
            raise EmbeddingRejected(
                f"Voyage returned vectors of shape {matrix.shape}, expected ({expected}, "
                f"{self._dim}); does model {self._model!r} support output_dimension {self._dim}?"
            )
        return matrix


def _http_error(status: int, body: str) -> EmbeddingError:
    detail = body.strip().replace("\n", " ")[:300]
    log.warning("embeddings.voyage_error", status=status)
    if status == 429 or status >= 500:
        return EmbeddingUnavailable(f"Voyage is unavailable (HTTP {status}): {detail}")
    return EmbeddingRejected(f"Voyage rejected the request (HTTP {status}): {detail}")


class RecentEmbeddings:
    """An embedder that keeps the vectors of the last `size` texts it embedded: a turn
    embeds the person's message to store it, then again to recall with it (for a hosted
    provider, a second request)."""

    def __init__(self, inner: Embedder, size: int = 512) -> None:
        self._inner = inner
        self._size = size
        self._kept: OrderedDict[str, Vector] = OrderedDict()

    @property
    def dim(self) -> int:
        """The wrapped embedder's width."""
        return self._inner.dim

    @property
    def name(self) -> str:
        """The wrapped embedder's name (the vectors are its own)."""
        return self._inner.name

    async def embed(self, texts: list[str]) -> Vector:
        """One unit row per text, from the kept ones where possible."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._kept]
        if missing:
            for text, row in zip(missing, await self._inner.embed(missing), strict=True):
                self._kept[text] = row
        rows = [self._kept[t] for t in texts]
        for text in texts:
            self._kept.move_to_end(text)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        stacked: Vector = np.stack(rows)
        return stacked

    async def aclose(self) -> None:
        """Close the wrapped embedder, if it holds anything open."""
        closer = getattr(self._inner, "aclose", None)
        if closer is not None:
            await closer()


def build_embedder(
    provider: str,
    dim: int,
    voyage_api_key: str | None,
    voyage_model: str,
    *,
    openai_model: str = "nomic-embed-text",
    openai_base_url: str | None = None,
    openai_api_key: str | None = None,
) -> Embedder:
    """The configured embedder: `minilm` (default, offline), `wordllama` (offline, static
    word vectors), `voyage` (needs a key) or `openai` (any OpenAI-compatible
    `/embeddings` server, e.g. Ollama)."""
    if provider == "minilm":
        from memory.recall.minilm import MiniLMEmbedder

        return MiniLMEmbedder(dim)
    if provider == "wordllama":
        return WordLlamaEmbedder(dim)
    if provider == "voyage":
        if not voyage_api_key:
            raise ValueError("embedding provider 'voyage' needs VOYAGE_API_KEY")
        return VoyageEmbedder(voyage_api_key, voyage_model, dim)
    if provider == "openai":
        from memory.recall.openai_embeddings import OpenAICompatibleEmbedder

        return OpenAICompatibleEmbedder(openai_model, dim, openai_base_url, openai_api_key)
    raise ValueError(
        f"unknown embedding provider: {provider!r} "
        "(use 'minilm', 'wordllama', 'voyage' or 'openai')"
    )
