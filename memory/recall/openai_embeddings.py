"""Embeddings from any OpenAI-compatible server (`POST {base}/embeddings`): OpenAI,
Ollama (e.g. `nomic-embed-text`), vLLM, LM Studio, llama.cpp's server.

The configured width is what the stored vectors have. The first request asks without
`dimensions` (servers whose model cannot shorten its vectors refuse the parameter); if
the vectors come back another width, it asks again with `dimensions` and keeps doing
so; if they still do not fit, `EmbeddingRejected` names the width the model gives.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import structlog

from memory.recall.embeddings import (
    EmbeddingRejected,
    EmbeddingUnavailable,
    HostedEmbedder,
    embedding_rows,
)
from memory.store.ports import Vector

log = structlog.get_logger(__name__)

OPENAI_URL = "https://api.openai.com/v1"


class OpenAICompatibleEmbedder(HostedEmbedder):
    """Embeddings over an OpenAI-compatible `/embeddings` endpoint."""

    def __init__(
        self,
        model: str,
        dim: int,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout_seconds: float = 60.0,
    ) -> None:
        self._model = model
        self._dim = dim
        self._url = (base_url or OPENAI_URL).rstrip("/") + "/embeddings"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None
        self._send_dimensions = False

    @property
    def name(self) -> str:
        """Provider, model and width, e.g. `openai-nomic-embed-text-768`."""
        return f"openai-{self._model}-{self._dim}"

    async def _batch(self, texts: list[str]) -> Vector:
        matrix = await self._request(texts)
        if matrix.shape[1] != self._dim and not self._send_dimensions:
            log.info("embeddings.asking_dimensions", model=self._model, got=matrix.shape[1])
            self._send_dimensions = True
            matrix = await self._request(texts)
        if matrix.shape != (len(texts), self._dim):
            raise EmbeddingRejected(
                f"model {self._model!r} returned vectors of shape {matrix.shape}, expected "
                f"({len(texts)}, {self._dim}); set COMPANION_EMBEDDING_DIM={matrix.shape[1]} "
                "(then `companion memory reembed`)"
            )
        return matrix

    async def _request(self, texts: list[str]) -> Vector:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        body: dict[str, Any] = {"input": texts, "model": self._model}
        if self._send_dimensions:
            body["dimensions"] = self._dim
        try:
            async with self._session.post(self._url, json=body, headers=self._headers) as response:
                if response.status >= 400:
                    raise _http_error(response.status, await response.text(), self._model)
                payload = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("embeddings.openai_unreachable", error=type(exc).__name__)
            raise EmbeddingUnavailable(
                f"the embedding server is unreachable: {type(exc).__name__}"
            ) from exc
        return _parse(payload, len(texts))


def _parse(payload: Any, expected: int) -> Vector:
    matrix = embedding_rows(payload, "the embedding server")
    if matrix.ndim != 2 or matrix.shape[0] != expected:
        raise EmbeddingRejected(f"the embedding server returned {matrix.shape[0]} vectors")
    return matrix


def _http_error(status: int, body: str, model: str) -> Exception:
    detail = body.strip().replace("\n", " ")[:300]
    log.warning("embeddings.openai_error", status=status)
    if status == 429 or status >= 500:
        return EmbeddingUnavailable(
            f"the embedding server is unavailable (HTTP {status}): {detail}"
        )
    if status == 404:
        return EmbeddingRejected(
            f"embedding model {model!r} not found (HTTP 404): check "
            f"COMPANION_OPENAI_EMBEDDING_MODEL (for Ollama: `ollama pull {model}`): {detail}"
        )
    return EmbeddingRejected(f"the embedding server refused the request (HTTP {status}): {detail}")
