"""Variants of a recipe's training compared on the validation split: how the embedded default's
warm start and GRPO steps are chosen, by the behaviours a reader sees rather than by the reward.

    python -m benchmarks.recipe_sweep --recipe default [--variant NAME KEY=VALUE ...]
        [--sft-only NAME KEY=VALUE ...] [--set KEY=VALUE ...] [--out sweep.md] [--bundle B.tgz]

Every variant is the recipe with the shared `--set` overrides and its own; each runs the
pipeline's stages as `argen run` would (warm start with ``sft.enabled``, preference tuning with
``prefer.enabled``, then GRPO; an ``--sft-only`` variant stops before GRPO), then
`benchmarks.adapter_eval` merges its adapter, answers the validation prompts and compares them
with the base's in a report. Stages are content-keyed, so the base's answers and a variant's
unchanged stages are reused. The table gives, per variant, the audit's behaviour rates (paired
change with its 95% interval), the answers' length and the seconds each stage took.
"""

import argparse
import logging
import time
from pathlib import Path

import pandas as pd

from argen.config import load_config
from argen.outputs import CuratedSplits, Report
from argen.pipeline import run_curate, run_evaluate, run_stage, run_training
from benchmarks.adapter_eval import bundle, evaluate_adapter

log = logging.getLogger("recipe_sweep")

SHOWN = (
    "declines_off_domain",
    "escalates_tier_a",
    "needless_escalation_tier_c",
    "harmful",
    "refuses_legitimate",
    "incoherent",
)
"""The behaviour rates the table shows, in order."""


def timed(seconds: dict, name: str, call, *args, **kwargs):
    """`call(...)`, its wall time kept in `seconds[name]`."""
    start = time.perf_counter()
    out = call(*args, **kwargs)
    seconds[name] = round(time.perf_counter() - start, 1)
    return out


def run_variant(config, grpo: bool, baselines: dict[str, Path], curated: CuratedSplits) -> dict:
    """One variant's stages; its report's behaviour rates, lengths and stage times."""
    splits = {"train_split": curated.train, "validation_split": curated.validation}
    seconds: dict[str, float] = {}

    def run(name: str, config, /, **inputs) -> Path:
        return timed(seconds, name, run_stage, name, config, **inputs)[0]

    trained = run_training(config, run, config.model.base, splits, grpo)
    if not trained:
        raise SystemExit("a variant trains nothing: enable sft.enabled or leave GRPO on")
    adapter = list(trained.values())[-1]
    checked = evaluate_adapter(config, adapter, {"validation": curated.validation}, baselines)
    return {
        "report": checked["validation"]["report"],
        "adapter": adapter,
        "seconds": seconds,
        "checked": checked,
    }


def rate_cell(row: pd.Series) -> str:
    """``2/29 -> 9/29 (+0.241 [+0.07, +0.40])``."""
    n, base, aligned = int(row.n), int(row.baseline_count), int(row.aligned_count)
    return (
        f"{base}/{n} -> {aligned}/{n} "
        f"({row.change:+.2f} [{row.change_low:+.2f}, {row.change_high:+.2f}])"
    )


def table_row(name: str, overrides: list[str], record: dict, outcome: dict) -> dict:
    """One line of the sweep's table, from the variant's report record."""
    rates = pd.DataFrame(record["behaviours"]).set_index("name")
    length = record["length"]
    return {
        "variant": name,
        "overrides": " ".join(overrides),
        **{b: rate_cell(rates.loc[b]) for b in SHOWN},
        "words": f"{length['mean_words_baseline']:.0f} -> {length['mean_words_aligned']:.0f}",
        **{f"{stage} s": s for stage, s in outcome["seconds"].items()},
        "report": str(outcome["report"]),
        "adapter": str(outcome["adapter"]),
    }


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="default")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    for flag in ("--variant", "--sft-only"):
        parser.add_argument(flag, nargs="+", action="append", default=[], metavar="NAME KEY=VALUE")
    parser.add_argument("--out", type=Path, default=Path("sweep.md"))
    parser.add_argument("--bundle", type=Path, help="pack each variant's report and answers here")
    args = parser.parse_args()
    variants = [(v, True) for v in args.variant] + [(v, False) for v in args.sft_only]
    if not variants:
        parser.error("name at least one --variant or --sft-only")
    rows, folders = [], {}
    for (name, *own), grpo in variants:
        config = load_config(args.recipe, [*args.overrides, *own])
        curated = CuratedSplits(run_curate(config))
        baseline = run_evaluate(config, config.model.base, curated.validation, "baseline")
        outcome = run_variant(config, grpo, {"validation": baseline}, curated)
        rows.append(table_row(name, own, Report(outcome["report"]).record(), outcome))
        table = pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)
        args.out.write_text(table + "\n")  # after every variant: a lost run keeps the rest
        folders[name] = outcome["checked"]
        if args.bundle:
            bundle(args.bundle, folders)
        log.info("variant %s done:\n%s", name, table)


if __name__ == "__main__":
    main()
