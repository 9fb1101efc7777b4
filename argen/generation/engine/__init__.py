"""The fast generation engine: a static-cache, graph-captured decoder for Llama and Qwen2
family policies (see `decoder`), its kernels (`kernels`) and its view of a model (`weights`)."""

from argen.generation.engine.decoder import Decoded, Engine, Sampling, completion_length
from argen.generation.engine.kernels import gumbel_max
from argen.generation.engine.weights import merged_weights, unsupported_reason

__all__ = [
    "Decoded",
    "Engine",
    "Sampling",
    "completion_length",
    "gumbel_max",
    "merged_weights",
    "unsupported_reason",
]
