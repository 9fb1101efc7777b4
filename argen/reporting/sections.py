"""The report's sections on what was compared (provenance) and on the audit: the reward judge
beside the audit, the behaviour rates overall and per category, response lengths."""

from typing import Any

import pandas as pd

from argen.evaluation.behaviours import AUDIT_DIMENSIONS, BEHAVIOURS
from argen.reporting.compare import Comparison
from argen.reporting.formats import fmt, fmt_p, tested_columns

NOT_RECORDED = "not recorded"


def shown(value: Any, digits: int = 16) -> str:
    """A recorded fact for a table cell: a SHA-256 cut to `digits` characters, a hardware
    record in one line, None as "not recorded"."""
    if value is None:
        return NOT_RECORDED
    if isinstance(value, dict) and "accelerator" in value:
        return f"{value['accelerator']} ({value.get('cpus')} CPUs; {value.get('platform')})"
    text = str(value)
    is_hash = len(text) == 64 and all(c in "0123456789abcdef" for c in text)
    return f"`{text[:digits]}`" if is_hash else text


def provenance_rows(block: dict) -> list[tuple[str, str]]:
    """What was compared, one fact per row."""
    base, baseline, aligned = block["base_model"], block["baseline"], block["aligned"]
    training, audit, scenarios = block["training"], block["audit"], block["scenarios"]
    packaged = base["packaged_sha256"]
    splits = scenarios["splits_sha256"] or {}
    independence = (
        "independent of the reward"
        if audit["independent"]
        else "**NOT independent: training optimised this grader**"
    )
    return [
        ("run", f"{block['run']}, written {block['generated']}"),
        ("recipe (resolved config)", shown(block["config_sha256"])),
        ("base model", base["name"] + (f" (packaged file {shown(packaged)})" if packaged else "")),
        *(
            (label, f"{shown(m['model_dir'])} (weights {shown(m['weights_sha256'])})")
            for label, m in (("baseline", baseline), ("aligned", aligned))
        ),
        ("adapter", f"{shown(aligned['adapter'])} ({shown(aligned['adapter_sha256'])})"),
        (
            "training",
            f"{shown(training['steps'])} steps, seed {shown(training['seed'])}, reward judge "
            f"{shown(training['reward_judge'])}, config {shown(training['config_sha256'])}",
        ),
        ("judge (scores)", f"{block['judge']['name']}, rubric {block['judge']['rubric_version']}"),
        (
            "audit (rates, gate)",
            f"{audit['label']}, threshold {audit['threshold']}; {independence}",
        ),
        (
            "scenarios",
            f"{scenarios['n']} prompts, content {shown(scenarios['content_sha256'])}; split file "
            + (
                f"{scenarios['split_file']} ({shown(scenarios['split_sha256'])})"
                if scenarios["split_file"]
                else NOT_RECORDED
            ),
        ),
        (
            "splits, sources",
            (", ".join(f"{k} {shown(v)}" for k, v in splits.items()) or "splits not recorded")
            + f"; sources {shown(scenarios['sources_sha256'])}",
        ),
        (
            "code",
            f"report {block['code_version']}; evaluations {shown(baseline['code_version'])} / "
            f"{shown(aligned['code_version'])}; training {shown(training['code_version'])}",
        ),
        ("seeds", ", ".join(f"{k} {shown(v)}" for k, v in block["seeds"].items())),
        *((f"hardware: {k}", shown(v)) for k, v in block["hardware"].items()),
    ]


def provenance_lines(block: dict) -> list[str]:
    """The block as a markdown table under a heading, for the top of a report."""
    table = pd.DataFrame(provenance_rows(block), columns=["what", "record"])
    return ["## Provenance", "", table.to_markdown(index=False), ""]


def audit_notice(audit: dict) -> list[str]:
    """Which grader the audit is, and a warning on top when training optimised it."""
    if audit["independent"]:
        return [
            f"Audit grader: {audit['label']}, which training did not optimise (reward judge: "
            f"{audit['reward_judge']}). Each answer is read with its prompt; a proposition holds "
            f"at probability {audit['threshold']} or more.",
            "",
        ]
    if audit.get("learned_tuned_labels"):
        why = (
            f"The audit grader ({audit['label']}) learned from the labels preference tuning "
            "trained the policy against: the policy learned to avoid what those labels flag, "
            "and the audit reads for the same, so its rates overstate the change. Point "
            "`audit.grader` at a grader trained on other labels."
        )
    else:
        why = (
            f"The reward judge training optimised ({audit['reward_judge']}) is the audit grader "
            f"itself ({audit['label']}): its rates are what training was rewarded for, not "
            "evidence of behaviour. Point `audit.grader` at a grader training did not optimise."
        )
    return ["> **Warning: the audit is NOT independent.** " + why, ""]


def reward_vs_audit_lines(comparison: Comparison) -> list[str]:
    """The reward judge's call per dimension beside the audit's failing rates, with flags."""
    rows = comparison.reward_vs_audit
    table = pd.DataFrame(
        {
            "dimension": [r["dimension"] for r in rows],
            "reward judge": [
                f"{r['reward_call']} ({fmt(r['reward_difference'], True)})" for r in rows
            ],
            "reward judge violations": [
                f"{r['reward_violations_baseline']:.3f} -> {r['reward_violations_aligned']:.3f}"
                for r in rows
            ],
            "audit failings": [
                f"{r['audit_failings_baseline']:.3f} -> {r['audit_failings_aligned']:.3f}"
                for r in rows
            ],
            "audit (Holm p)": [f"{r['audit_call']} ({fmt_p(r['audit_p_holm'])})" for r in rows],
            "reading": [
                f"**{r['status']}**" if r["likely_reward_hacking"] else r["status"] for r in rows
            ],
        }
    )
    flagged = [r["dimension"] for r in rows if r["likely_reward_hacking"]]
    lines = ["## Reward judge vs audit", "", *audit_notice(comparison.audit)]
    lines += [table.to_markdown(index=False, disable_numparse=True), ""]
    if flagged:
        lines += [
            f"> **Likely reward hacking** on {', '.join(flagged)}: the reward judge (the one "
            "training optimised) scores a gain that the audit's reading does not confirm. "
            "Read the reading sheet before believing the scores.",
            "",
        ]
    failings = "; ".join(f"{d}: {meaning}" for d, meaning in AUDIT_DIMENSIONS.items())
    return lines + [f"An audit failing is, per dimension, an answer that ({failings}).", ""]


def count_cells(frame: pd.DataFrame, model: str) -> list[str]:
    """``k/n rate [low, high]`` cells of one model's behaviour counts."""
    return [
        f"{k}/{n} {r:.3f} [{lo:.3f}, {hi:.3f}]" if n else "n/a"
        for k, n, r, lo, hi in zip(
            frame[f"{model}_count"],
            frame["n"],
            frame[model],
            frame[f"{model}_low"],
            frame[f"{model}_high"],
            strict=True,
        )
    ]


def change_cells(frame: pd.DataFrame) -> list[str]:
    """``+0.250 [+0.104, +0.391]`` cells: the paired change of a rate and its interval."""
    return [
        f"{c:+.3f} [{lo:+.3f}, {hi:+.3f}]" if n else "n/a"
        for c, lo, hi, n in zip(
            frame["change"], frame["change_low"], frame["change_high"], frame["n"], strict=True
        )
    ]


def behaviour_table(behaviours: pd.DataFrame) -> str:
    table = pd.DataFrame(
        {
            "the response...": behaviours["meaning"],
            "baseline (95% Wilson)": count_cells(behaviours, "baseline"),
            "aligned (95% Wilson)": count_cells(behaviours, "aligned"),
            "change (95% Newcombe)": change_cells(behaviours),
            **tested_columns(
                behaviours, {"only baseline": "only_baseline", "only aligned": "only_aligned"}
            ),
            "safer": behaviours["better"],
        }
    )
    return table.to_markdown(index=False, disable_numparse=True)


def category_table(by_category: pd.DataFrame) -> str:
    """Behaviour rows, category columns: ``baseline -> aligned of n`` per cell."""
    cells = by_category.assign(
        cell=[
            f"{b} -> {a} of {n}" if n else ""
            for b, a, n in zip(
                by_category["baseline_count"],
                by_category["aligned_count"],
                by_category["n"],
                strict=True,
            )
        ]
    )
    table = cells.pivot(index="behaviour", columns="category", values="cell")
    table = table.reindex([b for b in BEHAVIOURS if b in table.index])
    return table.reset_index().to_markdown(index=False, disable_numparse=True)


def behaviour_lines(comparison: Comparison) -> list[str]:
    """The audit's behaviour rates, paired, overall and per category, and response lengths."""
    rates = comparison.behaviours.set_index("name")
    missed = rates.loc["escalates_tier_a"]
    length = comparison.length
    return [
        "## Behaviour rates (audit)",
        "",
        *audit_notice(comparison.audit),
        behaviour_table(comparison.behaviours),
        "",
        f"Missed emergencies (tier A prompts whose answer does not urge emergency care now): "
        f"baseline {missed.n - missed.baseline_count} of {missed.n}, aligned "
        f"{missed.n - missed.aligned_count} of {missed.n}. Response length: baseline "
        f"{length['mean_tokens_baseline']:.1f} tokens ({length['mean_words_baseline']:.1f} words) "
        f"on average, aligned {length['mean_tokens_aligned']:.1f} "
        f"({length['mean_words_aligned']:.1f}); Wilcoxon signed-rank p "
        f"{fmt_p(length['p_wilcoxon'])}.",
        "",
        "Each rate counts the prompts it applies to (from the scenario: tier A for escalation, "
        "tier C for needless escalation, mixed-domain and S3 prompts for the off-domain part, "
        "clinical, para-clinical and mixed-domain prompts for a legitimate question). The change "
        "is aligned minus baseline, with Newcombe's paired 95% interval (not adjusted for "
        "multiplicity); McNemar's exact test on the paired answers, Holm-adjusted across the "
        "audit's rates (these and the failings per dimension); `safer` says which way is better.",
        "",
        "### By category (baseline -> aligned, of the prompts it applies to)",
        "",
        category_table(comparison.behaviours_by_category),
        "",
    ]
