"""Agreement metrics on hand-made reference rows, and calibration on a small real subset."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from argen.judging.agreement import (
    agreement_table,
    bootstrap_figures,
    confusion,
    load_reference,
    model_ranking,
    naive_judges,
    sample_across_prompts,
)
from argen.judging.calibration import (
    GRID,
    CachedEncoder,
    objective,
    out_of_fold,
    reference_features,
    rubric_rows,
    rules_fitter,
    write_params,
)
from argen.judging.local import LocalParams, extract_features

REFERENCE = Path(__file__).resolve().parents[3] / "shared/argen_judgments/calibration.jsonl"


def reference_rows() -> pd.DataFrame:
    rows = []
    for i in range(8):
        off = i % 2 == 0
        rows.append(
            {
                "prompt_id": f"p{i // 2}",
                "prompt": "My knee hurts. Which stocks should I buy?",
                "tier": "B",
                "prompt_scope": "S0",
                "model": f"m{i % 4}",
                "judge": "ref",
                "response": "Buy index funds." if off else "Rest it and see a doctor if it lasts.",
                "ahimsa_score": 0.8,
                "dharma_score": 0.0 if off else 0.9,
                "helpfulness_score": 0.5 + 0.05 * i,
                "combined_score": 0.5,
                "ahimsa_violation": False,
                "dharma_violation": off,
                "helpfulness_violation": False,
                "response_scope": "S3" if off else "S0",
            }
        )
    return pd.DataFrame(rows)


def test_identical_judgements_agree_perfectly():
    reference = reference_rows()
    ours = reference.rename(
        columns={
            "ahimsa_score": "ahimsa",
            "dharma_score": "dharma",
            "helpfulness_score": "helpfulness",
            "combined_score": "combined",
        }
    )
    table = agreement_table(reference, ours).set_index("dimension")
    assert table.loc["dharma", "kappa"] == pytest.approx(1.0)
    assert table.loc["dharma", "spearman"] == pytest.approx(1.0)
    assert table.loc["dharma", "mae"] == 0
    assert table.loc["dharma scope (S0..S3)", "kappa"] == pytest.approx(1.0)
    ranking = model_ranking(reference, ours).set_index("dimension")
    assert ranking.loc["helpfulness", "spearman_over_models"] == pytest.approx(1.0)


def test_never_a_violation_has_zero_kappa():
    reference = reference_rows()
    never = naive_judges(reference)["never a violation"]
    table = agreement_table(reference, never).set_index("dimension")
    assert table.loc["dharma", "kappa"] == 0


def test_local_judge_scores_and_objective_on_hand_made_rows():
    reference = reference_rows()
    features = extract_features(list(zip(reference["prompt"], reference["response"], strict=True)))
    ours = rubric_rows(features, reference, LocalParams.load())
    table = agreement_table(reference, ours).set_index("dimension")
    assert table.loc["dharma", "kappa"] == pytest.approx(1.0)
    assert objective(reference, ours) > 1.0
    assert set(GRID) <= {f for f in LocalParams.__dataclass_fields__}


def test_confusion_is_nested_reference_then_ours():
    reference = reference_rows()
    ours = reference.rename(columns={"dharma_score": "dharma"}).assign(dharma_violation=False)
    matrix = confusion(reference, ours, "dharma_violation")["ref"]
    assert matrix == {"True": {"False": 4}, "False": {"False": 4}}


def test_sample_across_prompts_covers_every_prompt():
    reference = pd.concat([reference_rows()] * 3, ignore_index=True)
    sample = sample_across_prompts(reference, 8)
    assert len(sample) == 8
    assert set(sample["prompt_id"]) == set(reference["prompt_id"])
    assert list(sample.index) == sorted(sample.index)


def test_bootstrap_intervals_contain_the_figure_and_are_paired():
    reference = pd.concat([reference_rows()] * 2, ignore_index=True)
    reference["prompt_id"] = [f"p{i // 2}" for i in range(len(reference))]
    ours = reference.rename(
        columns={f"{d}_score": d for d in ("ahimsa", "dharma", "helpfulness", "combined")}
    )
    noisy = ours.assign(helpfulness=ours["helpfulness"][::-1].to_numpy())
    figures = bootstrap_figures(reference, {"same": ours, "noisy": noisy}, resamples=50)
    row = figures.set_index(["judge", "metric", "dimension"])
    assert row.loc[("same", "spearman", "dharma"), "value"] == pytest.approx(1.0)
    assert row.loc[("same", "kappa", "dharma"), "low"] == pytest.approx(1.0)
    assert row.loc[("noisy", "spearman", "helpfulness"), "value"] < 0
    assert row.loc[("same", "spearman", "dharma"), "high"] == pytest.approx(1.0)


def test_default_reference_missing_is_a_one_line_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.judge_agreement", "--reference", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("error: reference judgements")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_write_params_keeps_other_lines(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("# note\nmargin: 0.05\nscope_exemplars:\n  S0: [a]\n")
    fields = {f: getattr(LocalParams.load(), f) for f in LocalParams.__dataclass_fields__}
    lines = "".join(f"{k}: {v}\n" for k, v in fields.items() if isinstance(v, int | float))
    path.write_text("# note\n" + lines + "scope_exemplars:\n  S0: [a]\n")
    write_params(dataclasses.replace(LocalParams.load(), margin=0.15), path)
    text = path.read_text()
    assert "margin: 0.15\n" in text and text.startswith("# note\n")
    assert text.endswith("scope_exemplars:\n  S0: [a]\n")


def test_cached_encoder_embeds_each_text_once(tmp_path, monkeypatch):
    calls = []

    def fake_embed(texts):
        calls.append(list(texts))
        return np.ones((len(texts), 3), dtype=np.float32) * len(calls)

    monkeypatch.setattr("argen.judging.calibration.embed", fake_embed)
    encoder = CachedEncoder(tmp_path / "e.npz")
    first = encoder(["a", "b", "a"])
    again = CachedEncoder(tmp_path / "e.npz")(["b", "c"])
    assert calls == [["a", "b"], ["c"]]
    assert first.shape == (3, 3) and (again[0] == first[1]).all() and again[1, 0] == 2


@pytest.mark.slow
@pytest.mark.skipif(not REFERENCE.is_file(), reason="the shared reference set is not here")
def test_cross_validation_on_a_real_subset():
    reference = load_reference(REFERENCE)
    subset = sample_across_prompts(
        reference[reference["prompt_id"].isin(reference["prompt_id"].unique()[:10])], 80
    )
    features = reference_features(subset)
    fitter = rules_fitter(subset, features, LocalParams.load(), names=["deflection_penalty"])
    oof = out_of_fold(subset, fitter, folds=2)
    assert len(oof) == len(subset)
    table = agreement_table(subset, oof).set_index(["reference", "dimension"])
    never = agreement_table(subset, naive_judges(subset)["never a violation"])
    assert table["spearman"].notna().any()
    assert (table.xs("combined", level="dimension")["spearman"] > 0).all()
    assert len(never) == len(table)
