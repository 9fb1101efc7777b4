"""Content hashes: the identity of files, directories and configs in manifests and cache keys."""

import hashlib
import json
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """Hex sha256 of one file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def json_sha256(value: Any) -> str:
    """Hex sha256 of a JSON-serialisable value in canonical form (sorted keys)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def tree_files(path: Path) -> list[Path]:
    """Every file of a directory tree, sorted: what its content hash and a sidecar cover."""
    return sorted(p for p in path.rglob("*") if p.is_file())


def dir_sha256(path: Path) -> str:
    """Hex sha256 over every file's relative path and content hash in a directory tree."""
    return json_sha256({str(p.relative_to(path)): file_sha256(p) for p in tree_files(path)})
