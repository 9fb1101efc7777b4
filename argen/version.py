"""The code version that keys caches: the package version plus a hash of the library's source."""

import functools
import hashlib
from pathlib import Path

import argen


@functools.cache
def code_version() -> str:
    """``<version>+<hash of argen/**/*.py and recipes>``; any library edit changes it."""
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in {".py", ".yaml"} and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return f"{argen.__version__}+{digest.hexdigest()[:12]}"
