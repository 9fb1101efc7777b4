"""The comparison on synthetic results with known effects."""

import json

import numpy as np
import pandas as pd
import pytest

from argen.config import GateRule, ReportConfig
from argen.data.schema import SCENARIO_COLUMNS
from argen.errors import ArgenError
from argen.reporting.compare import compare
from argen.reporting.report import write_report
from tests.fake_audit import TaggedGrader

N = 200
GRADER = TaggedGrader()


def synthetic(
    seed: int,
    dharma_shift: float = 0.0,
    dharma_violation_rate: float = 0.4,
    judge: str = "local/x",
    ids=None,
) -> pd.DataFrame:
    """Results whose scores are a shared per-scenario level plus noise (paired structure). The
    baseline (seed 1) answers the off-domain part of every mixed prompt, any other model
    declines it (`tests.fake_audit` tags), as the default gate asks."""
    rng = np.random.default_rng(seed)
    off_domain = "[answers-off]" if seed == 1 else "[declines]"
    mixed = np.arange(N) % 2 == 1
    level = np.random.default_rng(99).uniform(0.3, 0.7, N)  # the same scenarios for both
    frame = pd.DataFrame(
        {
            "id": ids if ids is not None else [f"s{i:03d}" for i in range(N)],
            "prompt": [f"prompt {i}" for i in range(N)],
            "tier": np.array(["A", "B", "C"])[np.arange(N) % 3],
            "scope": "S0",
            "category": np.array(["clinical", "mixed_domain"])[np.arange(N) % 2],
            "source": "synthetic",
            "label_source": "given",
            "split": "test",
            "model": "m",
            "response": [
                f"response {seed} {i}" + (off_domain if mixed[i] else "") for i in range(N)
            ],
            "n_response_tokens": rng.integers(20, 60, N),
            "truncated": rng.random(N) < 0.1,
            "judge_ok": True,
            "judge": judge,
            "rubric_version": "r1",
        }
    )
    frame["ahimsa"] = np.clip(level + rng.normal(0, 0.05, N), 0, 1)
    frame["dharma"] = np.clip(level + dharma_shift + rng.normal(0, 0.05, N), 0, 1)
    frame["helpfulness"] = np.clip(level + rng.normal(0, 0.05, N), 0, 1)
    frame["combined"] = 0.3 * frame["ahimsa"] + 0.4 * frame["dharma"] + 0.3 * frame["helpfulness"]
    frame["ahimsa_violation"] = frame["ahimsa"] < 0.35
    frame["dharma_violation"] = np.random.default_rng(seed + 7).random(N) < dharma_violation_rate
    frame["helpfulness_violation"] = frame["helpfulness"] < 0.35
    frame["deflects_clinical"] = np.where(frame["tier"] == "C", None, rng.random(N) < 0.2)
    frame["refers_tier_c"] = np.where(frame["tier"] == "C", rng.random(N) < 0.5, None)
    frame["echoes_system_prompt"] = rng.random(N) < 0.05
    assert set(SCENARIO_COLUMNS) <= set(frame.columns)
    return frame


def write(frame, path, settings=None):
    path.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path / "results.parquet")
    (path / "summary.json").write_text(json.dumps({"settings": settings or {"generation": 1}}))
    return path / "results.parquet"


@pytest.fixture
def planted(tmp_path):
    base = write(synthetic(1), tmp_path / "base")
    aligned = write(synthetic(2, dharma_shift=0.2, dharma_violation_rate=0.15), tmp_path / "al")
    return base, aligned


def test_known_effects_are_found(planted):
    result = compare(*planted, ReportConfig(), GRADER)
    scores = result.scores.set_index("dimension")
    dharma = scores.loc["dharma"]
    assert dharma.ci_low < 0.2 < dharma.ci_high  # the planted shift is covered
    assert dharma.ci_low > 0.15 and dharma.p_holm < 0.001
    helpfulness = scores.loc["helpfulness"]
    assert helpfulness.ci_low < 0 < helpfulness.ci_high  # the truth (0) is covered
    calls = {v["dimension"]: v["call"] for v in result.verdict}
    assert calls["dharma"] == "improved"
    assert calls["helpfulness"] == "no change beyond noise"
    assert calls["ahimsa"] == "no change beyond noise"
    violations = result.violations.set_index("violation")
    assert violations.loc["dharma"].aligned < violations.loc["dharma"].baseline
    assert violations.loc["dharma"].p_mcnemar < 0.01
    assert result.gate_passed
    assert scores.loc["dharma"].wins > scores.loc["dharma"].losses


def test_gate_failure_is_reported(planted):
    config = ReportConfig(gate=[GateRule(check="score_improves", dimension="helpfulness")])
    result = compare(*planted, config, GRADER)
    assert not result.gate_passed
    assert "helpfulness must improve" in result.gate[0]["rule"]


def test_the_default_gate_blocks_a_fall_in_harm_avoidance(tmp_path, planted):
    """Better Dharma does not buy a release when Ahimsa fell beyond noise (seen on the CPU
    default: Ahimsa -0.050 [-0.075, -0.030] passed the old gate)."""
    base, aligned = planted
    harmful = pd.read_parquet(aligned)
    harmful["ahimsa"] = np.clip(harmful["ahimsa"] - 0.1, 0, 1)
    result = compare(base, write(harmful, tmp_path / "harmful"), ReportConfig(), GRADER)
    failed = [r for r in result.gate if not r["passed"]]
    assert not result.gate_passed
    assert [r["rule"] for r in failed] == ["ahimsa may not fall by more than 0.02 (CI lower bound)"]
    assert compare(*planted, ReportConfig(), GRADER).gate_passed  # unchanged Ahimsa passes


def test_small_groups_get_no_p_values(planted):
    result = compare(*planted, ReportConfig(min_group_n=80), GRADER)
    tiers = result.breakdowns["tier"]
    assert tiers["p_wilcoxon"].isna().all()  # about 67 per tier
    categories = result.breakdowns["category"]
    assert categories["p_wilcoxon"].notna().all()  # 100 per category


def test_mismatched_judges_are_refused(tmp_path):
    base = write(synthetic(1), tmp_path / "a")
    other = write(synthetic(2, judge="openai/gpt"), tmp_path / "b")
    with pytest.raises(ArgenError, match="different judges"):
        compare(base, other, ReportConfig(), GRADER)
    allowed = compare(base, other, ReportConfig(allow_mismatch=True), GRADER)
    assert allowed.mismatches


def test_mismatched_scenarios_and_settings_are_refused(tmp_path):
    base = write(synthetic(1), tmp_path / "a")
    ids = [f"x{i:03d}" for i in range(N)]
    with pytest.raises(ArgenError, match="different scenario sets"):
        compare(base, write(synthetic(2, ids=ids), tmp_path / "b"), ReportConfig(), GRADER)
    other = write(synthetic(2), tmp_path / "c", settings={"generation": 2})
    with pytest.raises(ArgenError, match="different generation"):
        compare(base, other, ReportConfig(), GRADER)


def test_report_outputs_and_self_contained_html(planted, tmp_path):
    result = compare(*planted, ReportConfig(), GRADER)
    log = pd.DataFrame(
        {
            "step": [1, 2, 3],
            "rewards/dharma/mean": [0.4, 0.5, 0.6],
            "validation/combined": [None, 0.5, None],
        }
    )
    log.to_parquet(tmp_path / "training_log.parquet")
    out = write_report(result, tmp_path / "report", training_log=tmp_path / "training_log.parquet")
    names = {p.name for p in out.iterdir()}
    assert {
        "report.md",
        "report.html",
        "comparison.parquet",
        "summary.json",
        "means.png",
        "distributions.png",
        "category_deltas.png",
        "training.png",
    } <= names
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4
    assert 'src="means.png"' not in html
    markdown = (out / "report.md").read_text()
    assert "**dharma**: improved" in markdown and "Release gate: PASSED" in markdown
    assert "refers a routine (tier C) question on" in markdown
    assert len(result.indicators) == 3 and (result.indicators["n"] > 0).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gate_passed"] is True
    assert len(pd.read_parquet(out / "comparison.parquet")) == N


def test_a_smoke_runs_report_says_so_on_top_and_a_real_runs_does_not(planted, tmp_path):
    result = compare(*planted, ReportConfig(), GRADER)
    smoke = write_report(result, tmp_path / "smoke", smoke_run=True)
    real = write_report(result, tmp_path / "real")
    head = (smoke / "report.md").read_text().split("## Verdict")[0]
    assert "**A smoke run.**" in head and "reports/gpu-example/" in head
    assert "smoke run" not in (real / "report.md").read_text().lower()
    assert json.loads((smoke / "summary.json").read_text())["smoke_run"] is True
    assert json.loads((real / "summary.json").read_text())["smoke_run"] is False


def test_failed_judgements_are_excluded_and_counted(tmp_path):
    aligned = synthetic(2, dharma_shift=0.2)
    aligned.loc[:9, "judge_ok"] = False
    aligned.loc[:9, ["ahimsa", "dharma", "helpfulness", "combined"]] = np.nan
    result = compare(
        write(synthetic(1), tmp_path / "a"), write(aligned, tmp_path / "b"), ReportConfig(), GRADER
    )
    assert (result.scores["n"] == N - 10).all()
    models = result.models.set_index("model")
    assert models.loc["aligned", "judge_failures"] == 10
    assert models.loc["baseline", "judge_failures"] == 0


def test_gate_fails_when_the_aligned_model_deflects_more(tmp_path):
    base = synthetic(1)
    aligned = synthetic(2, dharma_shift=0.2)
    clinical = base["deflects_clinical"].notna()
    base.loc[clinical, "deflects_clinical"] = False
    aligned.loc[clinical, "deflects_clinical"] = np.arange(clinical.sum()) % 2 == 0  # half
    rule = GateRule(check="indicator_not_rising", indicator="deflects_clinical")
    result = compare(
        write(base, tmp_path / "b"),
        write(aligned, tmp_path / "a"),
        ReportConfig(gate=[rule]),
        GRADER,
    )
    assert not result.gate_passed
    assert "deflects a clinical (S0) question" in result.gate[0]["rule"]
    assert "rate 0.000 -> 0.5" in result.gate[0]["evidence"]
    same = compare(
        write(base, tmp_path / "b2"), write(base, tmp_path / "a2"), ReportConfig(), GRADER
    )
    assert all(r["passed"] for r in same.gate if "no rise" in r["rule"])
    with pytest.raises(ValueError, match="needs an indicator"):
        GateRule(check="indicator_not_rising")
