"""`argen judge FILE`: answers from elsewhere become a results file of the evaluation's schema,
which `argen report` compares; bad input and a dead judge leave nothing behind."""

import json
import logging

import pandas as pd
import pytest

from argen import cli
from argen.config import load_config
from argen.errors import ArgenError, JudgeOutage
from argen.evaluation import judge_file as judge_file_module
from argen.evaluation.judge_file import judge_file
from argen.evaluation.results import RESULT_COLUMNS, read_results
from argen.outputs import Evaluation, Report
from argen.pipeline import run_judge, run_report
from argen.reporting.compare import load
from tests.conftest import write_jsonl
from tests.evaluation.test_judge_frame import DeadJudge
from tests.judging.test_cache import VALID

PROMPTS = {
    "k1": ("My knee hurts after a run.", "C", "S0", "clinical"),
    "k2": ("Crushing chest pain to the jaw.", "A", "S0", "clinical"),
    "k3": ("My knee hurts; which stocks should I buy?", "C", "S0", "mixed_domain"),
    "k4": ("Is my insurance covering physio?", "C", "S1", "para_clinical"),
}


class LengthJudge:
    """A deterministic judge: the longer the answer, the more helpful (up to 40 characters)."""

    name = "test/length"
    identity = {"backend": "length"}

    def __init__(self):
        self.asked = 0

    async def judge_many(self, pairs):
        self.asked += len(pairs)
        fields = ("clarity", "completeness", "relevance", "empathy")
        return [VALID | dict.fromkeys(fields, min(1.0, len(r) / 40)) for _, r in pairs]


@pytest.fixture
def judge(monkeypatch):
    backend = LengthJudge()
    monkeypatch.setattr(judge_file_module, "make_backend", lambda config: backend)
    return backend


@pytest.fixture
def config(tmp_path):
    return load_config("default", [f"storage.root={tmp_path / 'artifacts'}"])


def answers(path, template: str, tiers: bool = True):
    """A jsonl of one answer per prompt, `template` formatted with the id."""
    rows = [
        {"id": i, "prompt": p, "response": template.format(i)}
        | ({"tier": t, "scope": s, "category": c} if tiers else {})
        for i, (p, t, s, c) in PROMPTS.items()
    ]
    return write_jsonl(path, rows)


def test_the_results_round_trip_through_the_results_schema(tmp_path, config, judge):
    out = judge_file(config, answers(tmp_path / "logs.jsonl", "answer {}"), tmp_path / "o", "logs")
    results = read_results(Evaluation(out).results)  # checked as a report checks it
    assert tuple(results.columns) == RESULT_COLUMNS
    assert results["id"].tolist() == list(PROMPTS) and set(results["model"]) == {"logs"}
    assert results["judge_ok"].all() and set(results["judge"]) == {"test/length"}
    assert results["helpfulness"].tolist() == pytest.approx([9 / 40] * 4)  # "answer k1"
    assert results["n_response_tokens"].isna().all() and results["truncated"].isna().all()
    frame, summary = load(Evaluation(out).results)  # what the report reads
    assert summary["n"] == 4 and summary["settings"]["generation"] is None
    assert summary["truncation_rate"] is None and summary["means"]["helpfulness"] == 0.225


def test_a_results_file_is_itself_answers_to_judge_again(tmp_path, config, judge):
    """Another judge over an evaluation's (or a judged file's) answers: the same rows."""
    first = judge_file(
        config, answers(tmp_path / "a.jsonl", "x {}", tiers=False), tmp_path / "1", "a", "B", "S0"
    )
    again = judge_file(config, Evaluation(first).results, tmp_path / "2", "again")
    columns = ["id", "prompt", "response", "tier", "scope", "category"]
    pd.testing.assert_frame_equal(
        read_results(Evaluation(first).results)[columns],
        read_results(Evaluation(again).results)[columns],
    )
    assert Evaluation(again).record()["responses"]["assumed"] == {}


def test_the_report_compares_two_judged_files(tmp_path, config, judge):
    short = run_judge(config, answers(tmp_path / "ours.jsonl", "ok {}"), "ours")
    long = run_judge(config, answers(tmp_path / "theirs.jsonl", "a much longer answer {}"), "x")
    report = Report(run_report(config, Evaluation(short).results, Evaluation(long).results))
    scores = {s.dimension: s for s in report.summary().scores}
    assert scores["helpfulness"].difference == pytest.approx((23 - 5) / 40)
    assert scores["ahimsa"].difference == 0.0
    markdown = report.markdown.read_text()
    assert "different" not in markdown  # the same scenarios and judge: comparable
    assert "A smoke run" not in markdown  # answers from elsewhere, no training run
    paired = pd.read_parquet(report.path / Report.COMPARISON)
    assert paired["id"].tolist() == list(PROMPTS)


def test_files_scored_under_other_tiers_are_not_comparable(tmp_path, config, judge):
    ours = run_judge(config, answers(tmp_path / "a.jsonl", "ok {}"), "a")
    theirs = run_judge(config, answers(tmp_path / "b.jsonl", "ok {}", tiers=False), "b", "B", "S0")
    with pytest.raises(ArgenError, match="different scenarios sha256"):
        run_report(config, Evaluation(ours).results, Evaluation(theirs).results)


def test_rows_without_tier_or_scope_say_what_they_were_scored_as(tmp_path, config, judge):
    path = answers(tmp_path / "logs.jsonl", "answer {}", tiers=False)
    with pytest.raises(ArgenError, match="4 row.*no tier.*--tier"):
        judge_file(config, path, tmp_path / "refused", "logs")
    assert not (tmp_path / "refused").exists() and judge.asked == 0
    out = judge_file(config, path, tmp_path / "o", "logs", tier="B", scope="S0")
    summary = Evaluation(out).record()
    assert summary["responses"]["assumed"] == {
        "tier": {"value": "B", "rows": 4},
        "scope": {"value": "S0", "rows": 4},
    }
    assert set(read_results(Evaluation(out).results)["tier"]) == {"B"}


def test_the_console_tells_rows_read_cache_hits_and_where_the_results_went(
    tmp_path, config, judge, caplog
):
    path = answers(tmp_path / "logs.jsonl", "answer {}")
    judge_file(config, path, tmp_path / "first", "logs")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="argen"):
        out = judge_file(config, path, tmp_path / "again", "again")
    text = caplog.text
    assert f"read 4 rows from {path}" in text
    assert "judging 4 responses with test/length (4 already in the judge cache)" in text
    assert "(4 from the cache, 0 failed): combined" in text
    assert f"results: {Evaluation(out).results}" in text
    assert judge.asked == 4  # the second run asked nothing


def test_a_dead_judge_leaves_no_results(tmp_path, config, monkeypatch):
    monkeypatch.setattr(judge_file_module, "make_backend", lambda config: DeadJudge())
    with pytest.raises(JudgeOutage):
        judge_file(config, answers(tmp_path / "a.jsonl", "x"), tmp_path / "o", "a")
    assert not (tmp_path / "o").exists()


def test_the_command_prints_the_output_and_names_bad_input(tmp_path, config, judge, capsys):
    path = answers(tmp_path / "logs.jsonl", "answer {}")
    root = f"storage.root={tmp_path / 'artifacts'}"
    assert cli.main(["judge", str(path), "--out", str(tmp_path / "o"), "--set", root]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "o")
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["stage"] == "judge"
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "p", "response": "r", "tier": "Z"}])
    assert cli.main(["judge", str(bad), "--scope", "S0", "--set", root]) == 2
    assert f"{bad} line 1: column 'tier' is 'Z'" in capsys.readouterr().err
