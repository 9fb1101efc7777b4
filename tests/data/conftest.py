"""Fixtures of the data tests: the real scenarios' MiniLM vectors, encoded once a session."""

import numpy as np
import pytest

from argen.config import CurateConfig
from argen.data.curate import validate
from argen.data.dedup import drop_exact_duplicates
from argen.data.sources import read_sources
from argen.judging.embeddings import embed
from tests.conftest import REPO

REAL_SOURCES = REPO / "data" / "scenarios"
EMBED = "argen.judging.embeddings.embed"
"""Where the curation finds `embed` when it runs."""


@pytest.fixture(scope="session")
def real_vectors() -> dict[str, np.ndarray]:
    """Each prompt of data/scenarios the curation embeds (valid, no exact duplicate) and its
    vector, from one `embed` call over them all as the curation makes it: the curation and
    dedup tests read the same 650 prompts, which take seconds to encode on a CPU."""
    _, rows = read_sources([REAL_SOURCES])
    scenarios, _ = validate(rows, CurateConfig())
    prompts = drop_exact_duplicates(scenarios)[0]["prompt"].tolist()
    return dict(zip(prompts, embed(prompts), strict=True))


def looked_up(vectors: dict[str, np.ndarray]):
    """An `embed` that looks each text's vector up instead of encoding it (any other text is a
    KeyError: for tests of the real data only)."""
    return lambda texts: np.stack([vectors[text] for text in texts])
