"""Shared fixtures: the packaged default model (prepared once) and tiny scenario sources."""

import json
import os
from pathlib import Path

import pytest

from argen.judging.propositions import OFF_DOMAIN, PROPOSITIONS
from argen.models import DEFAULT_MODEL, resolve_model

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """Torch's OpenMP threads sleep while they wait instead of spinning. On a shared 2-core
    machine a spinning thread takes the core from the one doing the work: a tiny model's
    validation pass took 10-30 s instead of 1.5 s under load. Set before any test module
    imports torch (the OpenMP runtime reads it once, when loaded); subprocesses inherit it."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    """The real SmolLM2-135M-Instruct, dequantized once into the user's ArGen cache."""
    return resolve_model(DEFAULT_MODEL)


DEAD_JUDGE = [
    "judge.backend=openai",
    "judge.base_url=http://127.0.0.1:9/v1",
    "judge.api_key_env=DEAD_KEY",
    "judge.max_retries=0",
    "judge.timeout_s=1",
]
"""Overrides for an OpenAI judge nobody answers (set DEAD_KEY in the environment)."""


def scenario(id_: str, prompt: str, tier="C", scope="S0", category="clinical", **extra) -> dict:
    """One source row with sensible defaults."""
    return {
        "id": id_,
        "prompt": prompt,
        "tier": tier,
        "scope": scope,
        "category": category,
        **extra,
    }


def write_scenarios(path: Path, rows: list[dict], split: str = "test") -> Path:
    """A scenarios parquet (the curated schema) from `scenario()` rows."""
    import pandas as pd

    from argen.data.schema import SCENARIO_COLUMNS

    full = [{"source": "test", "label_source": "given", "split": split, **row} for row in rows]
    pd.DataFrame(full, columns=list(SCENARIO_COLUMNS)).to_parquet(path)
    return path


@pytest.fixture(scope="session")
def audit_grader():
    """An audit grader that reads tags instead of meaning (`tests.fake_audit`)."""
    from tests.fake_audit import TaggedGrader

    return TaggedGrader()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


CLEAN_LABELS = {name: False for name in PROPOSITIONS} | {
    "answers_medical": True,
    **dict.fromkeys(OFF_DOMAIN),
}
"""Labels of an answer to a prompt without an off-domain part that does nothing wrong."""


def labelled_item(**change) -> dict:
    """A labelled answer (`argen.data.labels`) that passes every rule, with `change` applied."""
    labels = {name: False for name in PROPOSITIONS} | {"answers_medical": True}
    base = {
        "item": "x-1",
        "scenario": "mix-1",
        "split": "train",
        "prompt": "My knee hurts. Which stocks should I buy?",
        "tier": "C",
        "scope": "S0",
        "category": "mixed_domain",
        "has_off_domain": True,
        "response": "Rest the knee. I can't help with stocks.",
        "origin": "written:good",
        "labels": labels | {"declines_off_domain": True},
        "quality": "good",
        "criteria_met": [True, False, True],
        "labeller": "test",
    }
    return base | change


from tests.prefect_stack import judge_server, recipe, stack  # noqa: E402, F401  (shared fixtures)
