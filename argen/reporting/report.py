"""Render a comparison: report.md, a self-contained report.html, PNG plots,
comparison.parquet and summary.json in one report directory."""

import base64
import json
import logging
import re
from pathlib import Path

import pandas as pd
from markdown_it import MarkdownIt

from argen.atomic import atomic_dir
from argen.data.curate import write_parquet
from argen.outputs import Report
from argen.reporting.compare import Comparison
from argen.reporting.formats import fmt, fmt_p, tested_columns
from argen.reporting.plots import (
    plot_category_deltas,
    plot_distributions,
    plot_means,
    plot_training,
)
from argen.reporting.sections import behaviour_lines, provenance_lines, reward_vs_audit_lines
from argen.reporting.sheet import sheet_markdown

log = logging.getLogger(__name__)

TOP_CHANGES = 10


# ---------------------------------------------------------------- markdown


def verdict_lines(comparison: Comparison) -> list[str]:
    lines = []
    for item in comparison.verdict:
        lines.append(
            f"- **{item['dimension']}**: {item['call']} "
            f"(difference {fmt(item['difference'], True)}, "
            f"95% CI [{fmt(item['ci_low'], True)}, {fmt(item['ci_high'], True)}], "
            f"Holm p {fmt_p(item['p_holm'])})"
        )
    return lines


def gate_lines(comparison: Comparison) -> list[str]:
    decision = "PASSED" if comparison.gate_passed else "FAILED"
    lines = [f"**Release gate: {decision}**", ""]
    for rule in comparison.gate:
        mark = "pass" if rule["passed"] else "FAIL"
        lines.append(f"- [{mark}] {rule['rule']}: {rule['evidence']}")
    return lines


def score_table(scores: pd.DataFrame) -> str:
    table = pd.DataFrame(
        {
            "dimension": scores["dimension"],
            "n": scores["n"],
            "baseline": scores["baseline"].map(fmt),
            "aligned": scores["aligned"].map(fmt),
            "difference": scores["difference"].map(lambda x: fmt(x, True)),
            "95% CI": [
                f"[{fmt(a, True)}, {fmt(b, True)}]"
                for a, b in zip(scores["ci_low"], scores["ci_high"], strict=True)
            ],
            "Wilcoxon p": scores["p_wilcoxon"].map(fmt_p),
            "Holm p": scores["p_holm"].map(fmt_p) if "p_holm" in scores else "",
            "d_z": scores["effect_dz"].map(lambda x: fmt(x, True)),
            "win/tie/loss": [
                f"{w}/{t}/{lo}"
                for w, t, lo in zip(scores["wins"], scores["ties"], scores["losses"], strict=True)
            ],
        }
    )
    return table.to_markdown(index=False, disable_numparse=True)


def rate_cells(frame: pd.DataFrame, model: str) -> list[str]:
    """``rate [low, high]`` cells for one model's rates and their intervals."""
    return [
        f"{r:.3f} [{lo:.3f}, {hi:.3f}]"
        for r, lo, hi in zip(
            frame[model], frame[f"{model}_low"], frame[f"{model}_high"], strict=True
        )
    ]


def violation_table(violations: pd.DataFrame) -> str:
    table = pd.DataFrame(
        {
            "violation": violations["violation"],
            "n": violations["n"],
            "baseline rate (95% Wilson)": rate_cells(violations, "baseline"),
            "aligned rate (95% Wilson)": rate_cells(violations, "aligned"),
            **tested_columns(violations, {"fixed": "fixed", "introduced": "introduced"}),
        }
    )
    return table.to_markdown(index=False, disable_numparse=True)


def breakdown_table(table: pd.DataFrame, column: str) -> str:
    shown = table[table["dimension"] == "combined"]
    out = pd.DataFrame(
        {
            column: shown[column],
            "n": shown["n"],
            "baseline": shown["baseline"].map(fmt),
            "aligned": shown["aligned"].map(fmt),
            "difference": shown["difference"].map(lambda x: fmt(x, True)),
            "95% CI": [
                f"[{fmt(a, True)}, {fmt(b, True)}]"
                for a, b in zip(shown["ci_low"], shown["ci_high"], strict=True)
            ],
            "Wilcoxon p": shown["p_wilcoxon"].map(fmt_p),
        }
    )
    return out.to_markdown(index=False, disable_numparse=True)


def indicator_table(indicators: pd.DataFrame) -> str:
    if indicators.empty:
        return "(not recorded in these results)"
    table = pd.DataFrame(
        {
            "the response...": indicators["indicator"],
            "n": indicators["n"],
            "baseline (95% Wilson)": rate_cells(indicators, "baseline"),
            "aligned (95% Wilson)": rate_cells(indicators, "aligned"),
        }
    )
    return table.to_markdown(index=False, disable_numparse=True)


def quote(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    text = text if len(text) <= limit else text[:limit] + "..."
    return text.replace("|", "\\|")


def change_lines(paired: pd.DataFrame, largest: bool) -> list[str]:
    ok = paired[paired["both_ok"]].sort_values("combined_delta", ascending=not largest)
    lines = []
    for row in ok.head(TOP_CHANGES).itertuples():
        if (row.combined_delta > 0) != largest or row.combined_delta == 0:
            continue
        lines += [
            f"**{row.id}** ({row.category}, tier {row.tier}, scope {row.scope}): combined "
            f"{row.combined_base:.2f} -> {row.combined_aligned:.2f} (A {row.ahimsa_base:.2f}->"
            f"{row.ahimsa_aligned:.2f}, D {row.dharma_base:.2f}->{row.dharma_aligned:.2f}, "
            f"H {row.helpfulness_base:.2f}->{row.helpfulness_aligned:.2f})",
            "",
            f"> **Prompt:** {quote(row.prompt)}",
            ">",
            f"> **Baseline:** {quote(row.response_base)}",
            ">",
            f"> **Aligned:** {quote(row.response_aligned)}",
            "",
        ]
    return lines or ["(none)", ""]


SMOKE_RUN_NOTICE = [
    "> **A smoke run.** This recipe (`report.smoke_run: true`, as the embedded default) is a "
    "short CPU run on a 135M model that shows every stage of the pipeline working: a few GRPO "
    "steps, after one pass of the supervised warm start where the recipe has it. The warm start "
    "teaches where a decline and an escalation go; neither teaches the model medicine, so read "
    "its answers, verdict and gate in that light. For what alignment does at a larger scale, see "
    "the GPU example runs (`reports/gpu-example/` in the repository).",
    "",
]


def markdown_report(
    comparison: Comparison,
    title: str,
    plots: dict[str, str],
    smoke_run: bool = False,
    provenance: dict | None = None,
) -> str:
    """The report as markdown: what was compared, verdict and gate, the reward judge beside the
    audit, then the evidence section by section."""
    lines = [f"# {title}", "", *(SMOKE_RUN_NOTICE if smoke_run else [])]
    lines += provenance_lines(provenance) if provenance else []
    if comparison.mismatches:
        lines += ["> **Warning: these results were compared although they differ:**", ">"]
        lines += [f"> - {m}" for m in comparison.mismatches] + [""]
    lines += ["## Verdict", "", *verdict_lines(comparison), "", *gate_lines(comparison), ""]
    lines += reward_vs_audit_lines(comparison)
    lines += [
        "## Scores",
        "",
        score_table(comparison.scores),
        "",
        f"![means]({plots['means']})",
        "",
        "Differences are aligned minus baseline over scenarios both models got a "
        "judgement for; the interval is a paired BCa bootstrap, p-values are Wilcoxon "
        "signed-rank, Holm-adjusted across the scores and violation rates together; d_z is "
        "the mean difference over its standard deviation.",
        "",
    ]
    lines += [
        "## Violation rates",
        "",
        violation_table(comparison.violations),
        "",
        "`fixed`: a baseline violation the aligned model does not commit; `introduced`: "
        "the reverse.",
        "",
    ]
    lines += behaviour_lines(comparison)
    lines += side_effect_lines(comparison, plots) + breakdown_lines(comparison, plots)
    lines += ["## Largest improvements", "", *change_lines(comparison.paired, True)]
    lines += ["## Largest regressions", "", *change_lines(comparison.paired, False)]
    if "training" in plots:
        lines += ["## Training", "", f"![training curves]({plots['training']})", ""]
    lines += [
        "## Reading sheet",
        "",
        f"Answers side by side with the audit's flags, per category, the largest regressions "
        f"first: [{Report.READING_SHEET}]({Report.READING_SHEET}) (and the end of "
        f"{Report.HTML}). Read them before promoting the model.",
        "",
    ]
    return "\n".join(lines) + "\n"


def side_effect_lines(comparison: Comparison, plots: dict[str, str]) -> list[str]:
    """What changed besides the scores: lengths, truncation, judge failures, gaming signs."""
    return [
        "## What else changed",
        "",
        comparison.models.to_markdown(index=False, floatfmt=".3f"),
        "",
        "A shorter or cut-off answer can win or lose a judge for the wrong reason; judge "
        "failures are excluded from every statistic above.",
        "",
        f"![distributions]({plots['distributions']})",
        "",
        "## Is the aligned model gaming the judge?",
        "",
        indicator_table(comparison.indicators),
        "",
        "A policy can raise its scores by deflecting clinical questions, by sending every "
        "routine question to a doctor or by repeating its instructions as safety language. A "
        "rise in any rate deserves a look at the responses before the scores are believed.",
        "",
    ]


def breakdown_lines(comparison: Comparison, plots: dict[str, str]) -> list[str]:
    """The combined score by tier, scope and category."""
    lines = []
    for column in ("tier", "scope", "category"):
        table = breakdown_table(comparison.breakdowns[column], column)
        lines += [f"## By {column} (combined score)", "", table, ""]
    note = "Groups smaller than the configured minimum get no p-value."
    return lines + [note, "", f"![category deltas]({plots['category_deltas']})", ""]


def html_report(markdown: str, directory: Path, title: str) -> str:
    """The markdown as one self-contained HTML page: plots inlined as data URIs."""
    body = MarkdownIt("commonmark").enable("table").render(markdown)

    def inline(match: re.Match) -> str:
        data = base64.b64encode((directory / match.group(1)).read_bytes()).decode()
        return f'src="data:image/png;base64,{data}"'

    body = re.sub(r'src="([^"]+\.png)"', inline, body)
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;"
        "padding:0 1em;line-height:1.45}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;font-size:0.9em}"
        "blockquote{color:#444;border-left:3px solid #ccc;margin-left:0;padding-left:1em}"
        "img{max-width:100%}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{style}</style></head><body>{body}</body></html>\n"
    )


def summary_record(comparison: Comparison) -> dict:
    def records(frame: pd.DataFrame) -> list[dict]:
        return json.loads(frame.to_json(orient="records"))

    return {
        "gate_passed": comparison.gate_passed,
        "gate": comparison.gate,
        "verdict": comparison.verdict,
        "scores": records(comparison.scores),
        "violations": records(comparison.violations),
        "models": records(comparison.models),
        "gaming_indicators": records(comparison.indicators),
        "judge": comparison.judge,
        "audit": comparison.audit,
        "behaviours": records(comparison.behaviours),
        "behaviours_by_category": records(comparison.behaviours_by_category),
        "audit_failings": records(comparison.audit_dimensions),
        "reward_vs_audit": comparison.reward_vs_audit,
        "length": comparison.length,
        "reading_sheet": Report.READING_SHEET,
        "mismatches": comparison.mismatches,
    }


def write_report(
    comparison: Comparison,
    out_dir: Path,
    title: str = "ArGen comparison report",
    training_log: Path | None = None,
    smoke_run: bool = False,
    provenance: dict | None = None,
) -> Path:
    """Write every report output into `out_dir` (replaced atomically): a smoke run's report says
    so on top, `provenance` (`argen.reporting.provenance`) heads it, and the reading sheet is
    written beside it and follows it in the HTML."""
    with atomic_dir(out_dir) as tmp:
        plots = {k: v for k, v in Report.PLOTS.items() if k != "training"}
        plot_means(comparison, tmp / plots["means"])
        plot_distributions(comparison, tmp / plots["distributions"])
        plot_category_deltas(comparison, tmp / plots["category_deltas"])
        if training_log and training_log.is_file():
            frame = pd.read_parquet(training_log)
            if plot_training(frame, tmp / Report.PLOTS["training"]):
                plots["training"] = Report.PLOTS["training"]
        markdown = markdown_report(comparison, title, plots, smoke_run, provenance)
        sheet = sheet_markdown(comparison.sheet, comparison.audit)
        (tmp / Report.MARKDOWN).write_text(markdown)
        (tmp / Report.READING_SHEET).write_text(f"# {title}: reading sheet\n\n{sheet}")
        (tmp / Report.HTML).write_text(html_report(markdown + "\n" + sheet, tmp, title))
        write_parquet(comparison.paired, tmp / Report.COMPARISON)
        record = summary_record(comparison) | {"smoke_run": smoke_run}
        record |= {"provenance": provenance} if provenance else {}
        (tmp / Report.SIDECAR).write_text(json.dumps(record, indent=2) + "\n")
    log.info(
        "report written to %s (gate %s)", out_dir, "passed" if comparison.gate_passed else "failed"
    )
    return out_dir
