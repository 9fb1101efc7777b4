"""Preparing the packaged default model: the one-time dequantization, then every later load.

    python -m benchmarks.model_load

The first figure uses a fresh cache directory; the second resolves the spec again (hashing the
GGUF, finding the cache) and loads tokenizer and model with plain transformers.
"""

import tempfile
import time
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from argen.models import DEFAULT_MODEL, PACKAGED_MODELS, materialize_gguf


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        materialize_gguf(PACKAGED_MODELS[DEFAULT_MODEL], Path(tmp))
        print(f"first preparation (dequantize + save): {time.perf_counter() - start:.2f} s")
        for attempt in (1, 2, 3):
            start = time.perf_counter()
            directory = materialize_gguf(PACKAGED_MODELS[DEFAULT_MODEL], Path(tmp))
            AutoTokenizer.from_pretrained(directory)
            AutoModelForCausalLM.from_pretrained(directory)
            print(
                f"later load {attempt} (resolve + tokenizer + model): "
                f"{time.perf_counter() - start:.2f} s"
            )


if __name__ == "__main__":
    main()
