import numpy as np

from argen.judging import embeddings
from argen.judging.embeddings import embed


def test_unit_vectors_one_row_per_text():
    vectors = embed(["My knee hurts.", "Which stocks should I buy?", "My knee hurts."])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[2])
    assert np.allclose(vectors[0], embed(["My knee hurts."])[0], atol=1e-6)
    assert embed([]).shape == (0, 384)


def test_each_distinct_text_is_encoded_once(monkeypatch):
    seen = []

    class Recorder:
        def encode(self, texts, **kwargs):
            seen.extend(texts)
            return np.eye(len(texts), 384, dtype=np.float32)

    monkeypatch.setattr(embeddings, "encoder", lambda: Recorder())
    vectors = embed(["a", "b", "a", "a", "c"])
    assert seen == ["a", "b", "c"]
    assert [int(np.argmax(v)) for v in vectors] == [0, 1, 0, 0, 2]
