"""`argen <stage>`: run one pipeline stage, or `argen run` for the whole pipeline."""

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from argen import console
from argen.config import Config, load_config
from argen.data.schema import SCOPES, TIERS
from argen.errors import MACHINE_FAULTS, ArgenError, JudgeOutage
from argen.outputs import CuratedSplits

log = logging.getLogger("argen")


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    """`--recipe`, `--set` and `-v` (also accepted after the command: `argen run -v`)."""
    _add_verbose(parser, argparse.SUPPRESS)
    parser.add_argument("--recipe", default="default", help="bundled recipe name or YAML path")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set curate.seed=7 (repeatable)",
    )


def _add_verbose(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="show every library's log lines, HTTP requests, raw training metrics and bars",
    )


def _add_out_args(parser: argparse.ArgumentParser, default: str) -> None:
    """`--out` and `--overwrite`: where a stage writes, and whether an earlier output may go."""
    parser.add_argument("--out", type=Path, help=f"output directory (default: {default})")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier output of this stage in --out (never a folder of other files)",
    )


def _add_curate_parser(sub) -> None:
    """`argen curate`: scenario sources into the split parquets."""
    curate = sub.add_parser("curate", help="scenario sources -> train/validation/test parquets")
    _add_config_args(curate)
    curate.add_argument(
        "--source",
        type=Path,
        action="append",
        help="a source file, folder, datasets folder or hub:ID@SPLIT, in place of "
        "curate.sources (repeatable)",
    )
    _add_out_args(curate, "keyed under root")


def _add_judge_parser(sub) -> None:
    """`argen judge FILE`: judge answers a team already has."""
    judge = sub.add_parser(
        "judge", help="judge existing answers (prompt, response rows) -> results.parquet, summary"
    )
    _add_config_args(judge)
    judge.add_argument(
        "responses",
        type=Path,
        help="a .jsonl, .csv or .parquet file with prompt and response columns (optional: id, "
        "tier, scope, category, source)",
    )
    judge.add_argument("--label", help="name of the answers' model (default: the file's name)")
    judge.add_argument(
        "--tier", choices=TIERS, help="tier of the rows that name none (else they are an error)"
    )
    judge.add_argument(
        "--scope", choices=SCOPES, help="scope of the rows that name none (else they are an error)"
    )
    _add_out_args(judge, "keyed under root")


def build_parser(extra: dict[str, Callable] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="argen", description=__doc__)
    _add_verbose(parser, False)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="the whole pipeline on a recipe")
    _add_config_args(run)

    _add_curate_parser(sub)

    evaluate = sub.add_parser("evaluate", help="generate + judge -> results.parquet, summary")
    _add_config_args(evaluate)
    evaluate.add_argument("--model", help="model spec or directory (default: model.base)")
    evaluate.add_argument(
        "--scenarios", type=Path, help="scenarios parquet (default: the curated test split)"
    )
    evaluate.add_argument("--label", default=None, help="name of the model in the results")
    _add_out_args(evaluate, "keyed under root")

    _add_judge_parser(sub)

    train = sub.add_parser("train", help="GRPO + LoRA on the train split -> adapter directory")
    _add_config_args(train)
    train.add_argument("--model", help="base model spec or directory (default: model.base)")
    train.add_argument(
        "--scenarios",
        type=Path,
        help="curated directory with train/validation.parquet (default: curate)",
    )
    _add_out_args(train, "keyed under root")

    merge = sub.add_parser("merge", help="adapter + base -> standalone merged model directory")
    _add_config_args(merge)
    merge.add_argument("adapter", type=Path, help="adapter directory from argen train")
    merge.add_argument("--model", help="base model spec or directory (default: model.base)")
    _add_out_args(merge, "keyed under root")

    report = sub.add_parser("report", help="compare two results files -> report directory")
    _add_config_args(report)
    report.add_argument("baseline", type=Path, help="baseline results.parquet")
    report.add_argument("aligned", type=Path, help="aligned results.parquet")
    report.add_argument("--training-log", type=Path, help="training_log.parquet to plot")
    _add_out_args(report, "reports/<name>-<key>")

    model = sub.add_parser("model", help="resolve (and if needed prepare) the base model")
    _add_config_args(model)

    config = sub.add_parser("config", help="print the resolved configuration as YAML")
    _add_config_args(config)
    for name, func in (extra or {}).items():
        _add_config_args(sub.add_parser(name, help=(func.__doc__ or "").split("\n")[0]))
    return parser


def cmd_curate(config: Config, args: argparse.Namespace) -> Path:
    from argen.pipeline import run_curate

    if args.source:
        config.curate.sources = args.source
    return run_curate(config, args.out)


def cmd_evaluate(config: Config, args: argparse.Namespace) -> Path:
    from argen.pipeline import run_curate, run_evaluate

    scenarios = args.scenarios or CuratedSplits(run_curate(config)).test
    model = args.model or config.model.base
    label = args.label or Path(model).name
    return run_evaluate(config, model, scenarios, label, args.out)


def cmd_judge(config: Config, args: argparse.Namespace) -> Path:
    from argen.pipeline import run_judge

    label = args.label or args.responses.stem
    return run_judge(config, args.responses, label, args.tier, args.scope, args.out)


def cmd_train(config: Config, args: argparse.Namespace) -> Path:
    from argen.pipeline import run_curate, run_train

    curated = CuratedSplits(args.scenarios or run_curate(config))
    model = args.model or config.model.base
    return run_train(config, model, curated.train, curated.validation, args.out)


def cmd_merge(config: Config, args: argparse.Namespace) -> Path:
    from argen.pipeline import run_merge

    return run_merge(config, args.model or config.model.base, args.adapter, args.out)


def cmd_report(config: Config, args: argparse.Namespace) -> Path:
    from argen.pipeline import run_report

    return run_report(config, args.baseline, args.aligned, args.out, args.training_log)


def cmd_run(config: Config, recipe: str, overrides: list[str]) -> str:
    """The pipeline without an orchestrator (the `argen` entry point swaps in the flow), released
    on the recipe's model line as the flow does; the config already holds the `--set` overrides,
    which an orchestrator's driver is handed too."""
    from argen.pipeline import run_pipeline
    from argen.reporting.release import line_name, release

    line = line_name(recipe)
    outputs = run_pipeline(config, line)
    for stage, path in outputs.items():
        log.debug("%s: %s", stage, path)
    outcome = release(config, line, outputs)
    return console.final_lines(outcome.name, outcome.message, outcome.report)


def cmd_model(config: Config) -> Path:
    from argen.models import resolve_model

    return resolve_model(config.model.base)


STAGE_COMMANDS: dict[str, Callable[[Config, argparse.Namespace], Path]] = {
    "curate": cmd_curate,
    "evaluate": cmd_evaluate,
    "judge": cmd_judge,
    "train": cmd_train,
    "merge": cmd_merge,
    "report": cmd_report,
}
"""The one-stage commands: each gets a start and an end line on the console."""


def run_command(args: argparse.Namespace, run: Callable, extra: dict[str, Callable]) -> str:
    """What the parsed command prints on stdout (stage commands: their output directory)."""
    config = load_config(args.recipe, args.overrides)
    if getattr(args, "out", None) is not None:
        from argen.pipeline import check_out

        if args.out.is_symlink():  # its output would be renamed onto the link, after the work
            raise ArgenError(
                f"--out {args.out} is a symbolic link (to {os.readlink(args.out)}); "
                "name the folder itself"
            )
        args.out = check_out(args.command, args.out, args.overwrite)
    if args.command == "config":
        import yaml

        return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False).rstrip("\n")
    if args.command in STAGE_COMMANDS:
        with console.stage(args.command) as span:
            span.out = STAGE_COMMANDS[args.command](config, args)
        return str(span.out)
    if args.command == "model":
        return str(cmd_model(config))
    if args.command in extra:
        return str(extra[args.command](config, args.recipe))
    return str(run(config, args.recipe, args.overrides))


def main(
    argv: list[str] | None = None, run: Callable = cmd_run, extra: dict[str, Callable] | None = None
) -> int:
    """Parse and run a command. `run` replaces `argen run`'s driver and `extra` adds commands
    taking (config, recipe), so an orchestrator can plug in without the library knowing it."""
    extra = extra or {}
    args = build_parser(extra).parse_args(argv)
    console.configure(args.verbose)
    try:
        print(run_command(args, run, extra))
    except ArgenError as exc:
        print(f"argen: error: {exc}", file=sys.stderr)
        return 2
    except JudgeOutage as exc:
        print(f"argen: judge outage (try again later): {exc}", file=sys.stderr)
        return 3
    except OSError as exc:  # a full disk or a forbidden folder where no stage expected one
        if exc.errno not in MACHINE_FAULTS:
            raise
        print(f"argen: error: {MACHINE_FAULTS[exc.errno]}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
