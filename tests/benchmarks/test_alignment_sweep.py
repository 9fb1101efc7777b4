"""The sweep's runs and its choice, over bundles shaped like `alignment_run --bundle` writes."""

import io
import json
import tarfile

import pandas as pd

from benchmarks.alignment_sweep import expand, summarise


def write_bundle(
    path, combined_by_step: dict[int, tuple[float, float, float]], refers: dict | None = None
) -> None:
    """A bundle whose validation log has these (ahimsa, dharma, helpfulness) means by step, and
    optionally these needless-referral rates by step."""
    history = pd.DataFrame(
        [
            {"step": step, "ahimsa": a, "dharma": d, "helpfulness": h, "deflects_clinical": 0.1}
            | ({"refers_tier_c": refers[step]} if refers else {})
            for step, (a, d, h) in combined_by_step.items()
        ]
    )
    members = {
        "train/validation_log.parquet": history.to_parquet(),
        "report/summary.json": json.dumps({"verdict": ["test"], "gate": [], "other": 1}).encode(),
        "report-holdout/summary.json": json.dumps({"verdict": ["holdout"], "gate": []}).encode(),
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_seeds_repeat_every_variant():
    variants = {"a": [], "b": ["train.learning_rate=1e-5"]}
    assert expand(variants, None) == {
        "a": {"variant": "a", "overrides": []},
        "b": {"variant": "b", "overrides": ["train.learning_rate=1e-5"]},
    }
    runs = expand(variants, [0, 7])
    assert list(runs) == ["a-seed0", "a-seed7", "b-seed0", "b-seed7"]
    assert runs["b-seed7"] == {
        "variant": "b",
        "overrides": ["train.learning_rate=1e-5", "train.seed=7"],
    }


def test_the_choice_is_the_best_mean_over_seeds_and_ignores_step_zero(tmp_path):
    # a's first seed has the single best checkpoint, b is better on average; step 0 (the
    # untrained policy) scores highest of all and must never count
    write_bundle(tmp_path / "a-seed0.tgz", {0: (1, 1, 1), 10: (0.9, 0.9, 0.9)})
    write_bundle(tmp_path / "a-seed1.tgz", {0: (1, 1, 1), 10: (0.5, 0.5, 0.5)})
    write_bundle(tmp_path / "b-seed0.tgz", {0: (1, 1, 1), 10: (0.8, 0.8, 0.8)})
    write_bundle(tmp_path / "b-seed1.tgz", {0: (1, 1, 1), 10: (0.6, 0.6, 0.6), 20: (0.7, 0.7, 0.7)})
    summary = summarise(expand({"a": [], "b": []}, [0, 1]), tmp_path)
    assert summary["variants"]["a"] == {
        "runs": {"a-seed0": 0.9, "a-seed1": 0.5},
        "raises_gaming": False,
        "mean_best": 0.7,
    }
    assert summary["variants"]["b"]["mean_best"] == 0.75
    assert summary["chosen"] == "b"
    run = summary["runs"]["b-seed1"]
    assert run["best_validation"]["step"] == 20
    assert run["headline"] == {
        "test": {"verdict": ["test"], "gate": []},
        "holdout": {"verdict": ["holdout"], "gate": []},
    }
    assert json.loads((tmp_path / "summary.json").read_text())["chosen"] == "b"


def test_a_run_without_a_bundle_is_listed_and_not_scored(tmp_path):
    write_bundle(tmp_path / "a.tgz", {0: (0.5, 0.5, 0.5), 5: (0.6, 0.6, 0.6)})
    summary = summarise(expand({"a": [], "crashed": []}, None), tmp_path)
    assert summary["chosen"] == "a" and "crashed" not in summary["variants"]
    assert summary["runs"]["crashed"]["headline"] is None
    assert summary["runs"]["crashed"]["best_validation"] is None


def test_a_variant_whose_kept_checkpoint_raises_a_gaming_sign_is_not_chosen(tmp_path):
    # a scores higher but learned to refer routine questions on (0.3 -> 0.5 on validation)
    write_bundle(tmp_path / "a.tgz", {0: (0.5, 0.5, 0.5), 10: (0.9, 0.9, 0.9)}, {0: 0.3, 10: 0.5})
    write_bundle(tmp_path / "b.tgz", {0: (0.5, 0.5, 0.5), 10: (0.7, 0.7, 0.7)}, {0: 0.3, 10: 0.32})
    summary = summarise(expand({"a": [], "b": []}, None), tmp_path)
    assert (
        summary["variants"]["a"]["raises_gaming"] and not summary["variants"]["b"]["raises_gaming"]
    )
    assert summary["runs"]["a"]["best_validation"]["rise_refers_tier_c"] == 0.2
    assert summary["chosen"] == "b"
