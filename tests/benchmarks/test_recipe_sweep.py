"""A recipe sweep: each variant runs the warm start and GRPO as the pipeline would (GRPO
continuing the warm start's adapter, or skipped), and its table row shows the audit's paired
behaviour changes."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from argen.config import load_config
from benchmarks import adapter_eval, recipe_sweep


@pytest.fixture
def stages(tmp_path, monkeypatch):
    """The stages recorded; each returns a folder named after what it was given."""
    calls = []

    def run_stage(name, config, **inputs):
        calls.append((name, inputs.get("warm_start")))
        return tmp_path / name, False

    monkeypatch.setattr(recipe_sweep, "run_stage", run_stage)
    # merged, answered and reported by adapter_eval, as a published adapter is checked
    monkeypatch.setattr(adapter_eval, "run_merge", lambda c, m, a: calls.append(("merge", a)))
    monkeypatch.setattr(adapter_eval, "run_evaluate", lambda *a: tmp_path / "aligned")
    monkeypatch.setattr(adapter_eval, "run_report", lambda *a, **k: tmp_path / "report")
    monkeypatch.setattr(adapter_eval, "report_headline", lambda report: {})
    return SimpleNamespace(calls=calls, root=tmp_path)


BASELINES = {"validation": Path("base")}


def curated(root: Path):
    return SimpleNamespace(train=root / "train.parquet", validation=root / "validation.parquet")


def test_grpo_continues_the_warm_start_and_the_merge_takes_the_last_adapter(stages):
    config = load_config("default", ["sft.enabled=true"])
    outcome = recipe_sweep.run_variant(config, True, BASELINES, curated(stages.root))
    assert stages.calls == [
        ("sft", None),
        ("train", stages.root / "sft"),
        ("merge", stages.root / "train"),
    ]
    assert set(outcome["seconds"]) == {"sft", "train"}
    assert outcome["report"] == stages.root / "report"
    assert outcome["adapter"] == stages.root / "train"


def test_the_warm_start_alone_merges_its_own_adapter(stages):
    config = load_config("default", ["sft.enabled=true"])
    recipe_sweep.run_variant(config, False, BASELINES, curated(stages.root))
    assert stages.calls == [("sft", None), ("merge", stages.root / "sft")]


def test_preference_tuning_continues_the_warm_start_before_grpo(stages):
    config = load_config("default", ["sft.enabled=true", "prefer.enabled=true"])
    recipe_sweep.run_variant(config, False, BASELINES, curated(stages.root))
    assert stages.calls == [
        ("sft", None),
        ("prefer", stages.root / "sft"),
        ("merge", stages.root / "prefer"),
    ]


def test_a_variant_that_trains_nothing_is_refused(stages):
    with pytest.raises(SystemExit, match="trains nothing"):
        recipe_sweep.run_variant(load_config(), False, {}, curated(stages.root))


def test_a_row_shows_each_paired_change_with_its_interval():
    rates = [
        {
            "name": name,
            "n": 29,
            "baseline_count": 7,
            "aligned_count": 16,
            "change": 9 / 29,
            "change_low": 0.07,
            "change_high": 0.5,
        }
        for name in recipe_sweep.SHOWN
    ]
    length = {"mean_words_baseline": 81.2, "mean_words_aligned": 94.0}
    record = {"behaviours": rates, "length": length}
    outcome = {"report": Path("r"), "adapter": Path("a"), "seconds": {"sft": 41.9}}
    row = recipe_sweep.table_row("ep1", ["sft.epochs=1"], record, outcome)
    assert row["declines_off_domain"] == "7/29 -> 16/29 (+0.31 [+0.07, +0.50])"
    assert (row["words"], row["sft s"], row["overrides"]) == ("81 -> 94", 41.9, "sft.epochs=1")
    assert row["adapter"] == "a"
