"""Regenerate the published example reports (`reports/gpu-example/`, `reports/gpu-example-holdout/`)
with this code, from what they committed: the paired answers and scores (`comparison.parquet`),
the training record and log of the run (`reports/gpu-qwen0.5b-2026-11-26/seed1/`) and the
adapter. The audit grader reads every stored answer again (on a CPU, about 35 s per 400
answers); the reward judge's scores are the run's own.

    python -m benchmarks.example_reports [--only gpu-example]

The run kept no evaluation records (summary.json beside each results file), so the provenance
says which facts come from the published evidence instead (its README) and which were not
recorded; the generated files replace the old ones, the hand-written README.md, READING.md and
the adapter stay.
"""

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from argen.config import load_config
from argen.evaluation.audit import AuditGrader
from argen.hashing import dir_sha256
from argen.outputs import Report
from argen.reporting.compare import KEEP, PER_MODEL, compare
from argen.reporting.provenance import Records, provenance
from argen.reporting.report import write_report

EVIDENCE = Path("reports/gpu-qwen0.5b-2026-11-26/seed1")
ADAPTER = Path("reports/gpu-example/adapter")
STATED = "NVIDIA H100 80GB HBM3 (stated by the run's README; the run recorded no hardware)"
EXAMPLES = {
    "gpu-example": ("gpu-example-seed1", EVIDENCE / "training_log.parquet"),
    "gpu-example-holdout": ("gpu-example-seed1-holdout", None),
}
"""Each example folder, the name its report was published under and the training log it
plots (the test split's report only, as published)."""
GENERATED = (
    Report.MARKDOWN,
    Report.HTML,
    Report.READING_SHEET,
    Report.COMPARISON,
    Report.SIDECAR,
    *Report.PLOTS.values(),
)


def unpaired(comparison: pd.DataFrame, model: str, judge: str) -> pd.DataFrame:
    """One model's results rows back from a report's paired rows."""
    columns = [c for c in comparison if c.endswith(f"_{model}")]
    frame = comparison[list(KEEP)].join(
        comparison[columns].rename(columns=lambda c: c.removesuffix(f"_{model}"))
    )
    missing = [c for c in PER_MODEL if c not in frame]
    if missing:
        raise SystemExit(f"the comparison lacks {', '.join(missing)} of the {model} model")
    return frame.assign(judge=judge, rubric_version="not recorded")


def regenerate(folder: Path, name: str, log: Path | None, scratch: Path) -> dict:
    """Write the example's report again into `folder`; returns its summary."""
    training = json.loads((EVIDENCE / "train-manifest.json").read_text())
    judge = training["config"]["judge"]
    paired = pd.read_parquet(folder / Report.COMPARISON)
    results = {}
    for model in ("base", "aligned"):
        path = scratch / name / model / "results.parquet"
        path.parent.mkdir(parents=True)
        unpaired(paired, model, judge).to_parquet(path)
        results[model] = path
    config = load_config("gpu-qwen0.5b")
    records = Records(training=training)
    grader = AuditGrader.from_config(config.audit)
    comparison = compare(results["base"], results["aligned"], config.report, grader, judge)
    block = provenance(config, name, comparison.paired, comparison.judge, comparison.audit, records)
    block["baseline"] |= {"label": "baseline", "model_dir": training["base_model"]}
    block["aligned"] |= {
        "label": "aligned",
        "model_dir": "merged base + adapter (not kept)",
        "adapter": f"{ADAPTER} (float16 copy of the trained adapter)",
        "adapter_sha256": dir_sha256(ADAPTER),
    }
    for stage in ("baseline evaluation", "aligned evaluation", "training"):
        block["hardware"][stage] = STATED
    out = scratch / name / "report"
    title = f"ArGen comparison report: {name}"
    write_report(comparison, out, title, log, config.report.smoke_run, block)
    for file in GENERATED:
        if (out / file).is_file():
            shutil.copy2(out / file, folder / file)
    return json.loads((out / Report.SIDECAR).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=list(EXAMPLES), help="regenerate this example only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        for folder, (name, log) in EXAMPLES.items():
            if args.only and folder != args.only:
                continue
            summary = regenerate(Path("reports") / folder, name, log, Path(scratch))
            gate = "passed" if summary["gate_passed"] else "FAILED"
            failed = [g["rule"] for g in summary["gate"] if not g["passed"]]
            print(f"{folder}: gate {gate}" + (f" ({'; '.join(failed)})" if failed else ""))


if __name__ == "__main__":
    main()
