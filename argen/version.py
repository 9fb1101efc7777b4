"""The code version that keys caches: the package version plus a hash of the library's source."""

import functools
import hashlib
from pathlib import Path

import argen
from argen.config import RECIPES_DIR


def source_digest(root: Path, recipes: Path) -> str:
    """A hash of the .py and data .yaml files under `root`, the recipes folder left out."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        skipped = "__pycache__" in path.parts or path.parent == recipes
        if path.suffix in {".py", ".yaml"} and not skipped:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@functools.cache
def code_version() -> str:
    """``<version>+<source digest>``; any library edit changes it. Recipes are not hashed: a
    stage's key holds the resolved settings it uses, and a recipe added or edited while a
    pipeline runs must not give its workers (new processes) other keys than the flow that
    started them."""
    return f"{argen.__version__}+{source_digest(Path(__file__).parent, RECIPES_DIR)}"
