"""The current model: a small pointer to the aligned model whose report passed the gate."""

import json
from datetime import UTC, datetime
from pathlib import Path

from argen.atomic import atomic_file
from argen.config import Config


def pointer_path(config: Config) -> Path:
    return config.storage.root / "current_model.json"


def current_model(config: Config) -> dict | None:
    """The pointer's content, or None before any model passed the gate."""
    path = pointer_path(config)
    return json.loads(path.read_text()) if path.is_file() else None


def promote(config: Config, model_dir: Path, report_dir: Path) -> Path:
    """Record `model_dir` as the current model (atomically), citing the report that passed."""
    record = {
        "model_dir": str(model_dir),
        "report": str(report_dir),
        "promoted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "previous": (current_model(config) or {}).get("model_dir"),
    }
    path = pointer_path(config)
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(record, indent=2) + "\n")
    return path
