"""The console: what a run prints by default and with -v, stage lines, step lines, the end."""

import io
import json
import logging
import os
import re
import warnings
from types import SimpleNamespace

import pytest
from tqdm import tqdm

from argen import cli, console
from tests.test_cli import curate_args


@pytest.fixture
def restore_logging():
    """configure() changes process-wide logging: put it back after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {n: logging.getLogger(n).level for n in ("argen", "httpx", "httpcore")}
    environ = dict(os.environ)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)
    logging.captureWarnings(False)
    os.environ.clear()
    os.environ.update(environ)


def emit_samples() -> None:
    """One record of each kind a pipeline run produces."""
    logging.getLogger("httpx").info('HTTP Request: POST http://127.0.0.1:1/api/logs/ "201"')
    logging.getLogger("httpcore.connection").debug("connect_tcp.started")
    logging.getLogger("prefect.task_runs").info("Finished in state Completed()")
    logging.getLogger("argen.data.curate").info("curated 40 scenarios")
    logging.getLogger("argen.evaluation.evaluate").info("generated 8/12", extra=console.UI_ONLY)
    logging.getLogger("argen.training.train").debug("step 1 metrics")
    # a library's warning (not transformers': it stops propagation once imported, and keeps its
    # own stderr handler, so its warnings show either way)
    logging.getLogger("datasets_like.builder").warning("a real warning")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("`gradient_checkpointing` is deprecated", FutureWarning, stacklevel=1)


def test_default_console_shows_only_argen_lines_and_warnings(restore_logging):
    out = io.StringIO()
    console.configure(verbose=False, stream=out)
    emit_samples()
    text = out.getvalue()
    assert "curated 40 scenarios" in text
    assert "a real warning" in text
    for hidden in ("HTTP Request", "connect_tcp", "Finished in state", "generated 8/12"):
        assert hidden not in text
    assert "step 1 metrics" not in text and "deprecated" not in text
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"


def test_verbose_console_shows_everything_else(restore_logging):
    out = io.StringIO()
    console.configure(verbose=True, stream=out)
    emit_samples()
    text = out.getvalue()
    for shown in ("HTTP Request", "Finished in state", "generated 8/12", "step 1 metrics"):
        assert shown in text
    assert "deprecated" in text and "INFO httpx:" in text
    assert "connect_tcp" not in text  # httpcore's DEBUG chatter stays out even with -v


def test_configure_twice_keeps_one_console_handler(restore_logging):
    first, second = io.StringIO(), io.StringIO()
    console.configure(stream=first)
    console.configure(stream=second)
    logging.getLogger("argen").info("once")
    assert first.getvalue() == "" and second.getvalue().count("once") == 1


def test_log_lines_do_not_break_a_progress_bar(restore_logging):
    """The bar is cleared before the line (a carriage return right before it) and drawn again
    after it; a plain StreamHandler would glue the line onto the bar's row."""
    out = io.StringIO()
    console.configure(stream=out)
    with tqdm(total=4, file=out, desc="generate") as bar:
        bar.update(1)
        logging.getLogger("argen.evaluation.evaluate").info("LINE")
        before, after = out.getvalue().split("LINE")
    assert re.fullmatch(r"\d\d:\d\d:\d\d ", before.split("\r")[-1])  # a row of its own
    assert after.startswith("\n")
    assert "generate" in after  # redrawn below the line


def test_stage_lines_carry_duration_and_output(restore_logging, tmp_path):
    out = io.StringIO()
    console.configure(stream=out)
    with console.stage("evaluate baseline", tmp_path / "ev"):
        pass
    with console.stage("curate", tmp_path / "cu", reused=True):
        pass
    with pytest.raises(ValueError), console.stage("train") as span:
        span.out = tmp_path / "never"
        raise ValueError("bad")
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("evaluate baseline: started")
    assert lines[1].endswith(f"evaluate baseline: done in 0.0 s -> {tmp_path / 'ev'}")
    assert lines[2].endswith(f"curate: reused (0.0 s) -> {tmp_path / 'cu'}")
    assert lines[3].endswith("train: started")
    assert lines[4].endswith("train: failed after 0.0 s (bad)")
    assert len(lines) == 5


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.44, "0.4 s"), (75.2, "1 min 15 s"), (3725, "1 h 02 min")]
)
def test_duration(seconds, text):
    assert console.duration(seconds) == text


TRL_LOGS = {
    "loss": 0.0123,
    "grad_norm": 0.41,
    "learning_rate": 5e-05,
    "num_tokens": 1234.0,
    "completions/mean_length": 16.0,
    "rewards/ahimsa/mean": 0.8125,
    "rewards/ahimsa/std": 0.1,
    "rewards/dharma/mean": 0.6,
    "rewards/dharma/std": 0.2,
    "rewards/helpfulness/mean": None,
    "reward": 0.7,
    "kl": 0.00123,
    "entropy": 1.2,
}


def test_step_line_format():
    line = console.step_line(3, 12, TRL_LOGS, 6.84)
    assert line == (
        "train: step 3/12  ahimsa 0.812  dharma 0.600  helpfulness -  kl 0.0012  6.8 s/step"
    )
    no_kl = {k: v for k, v in TRL_LOGS.items() if k != "kl"}  # beta 0: TRL logs no KL
    assert "  kl -  " in console.step_line(1, 2, no_kl, 1.0)


def test_final_lines_name_the_outcome_verdict_and_report(tmp_path):
    verdict = [
        {"dimension": "ahimsa", "call": "no change beyond noise", "difference": 0.0123},
        {"dimension": "dharma", "call": "improved", "difference": 0.081},
    ]
    summary = {"verdict": verdict, "gate_passed": False, "reading_sheet": "reading-sheet.md"}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    lines = console.final_lines("Gate failed", "the champion stays", tmp_path).splitlines()
    assert lines == [
        "Gate failed: the champion stays",
        "verdict: ahimsa no change beyond noise (+0.012), dharma improved (+0.081); "
        "release gate failed",
        f"report: {tmp_path / 'report.md'}",
        f"read before promoting: {tmp_path / 'reading-sheet.md'}",
    ]


def test_final_lines_of_a_smoke_run_say_what_it_shows(tmp_path):
    verdict = [{"dimension": "dharma", "call": "no change beyond noise", "difference": 0.0}]
    summary = {"verdict": verdict, "gate_passed": False, "smoke_run": True}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    lines = console.final_lines("Gate failed", "the champion stays", tmp_path).splitlines()
    assert lines[-1] == console.SMOKE_RUN_LINE and "reports/gpu-example/" in lines[-1]


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["run"], False),
        (["-v", "run"], True),
        (["run", "-v"], True),
        (["curate", "--verbose"], True),
    ],
)
def test_verbose_flag_before_or_after_the_command(argv, verbose):
    assert cli.build_parser().parse_args(argv).verbose is verbose


def test_cli_stage_command_prints_stage_lines(restore_logging, tmp_path, capsys):
    """`argen curate` (a stage command) prints its output on stdout, its stage lines on stderr."""
    out = tmp_path / "out"
    assert cli.main(curate_args(tmp_path, out)) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out)
    assert "curate: started" in captured.err
    assert "curate: done in " in captured.err and f"-> {out}" in captured.err


class FakeTrainer:
    """The two Trainer methods use_step_lines calls, over transformers' real CallbackHandler."""

    def __init__(self, handler):
        self.callback_handler = handler

    def remove_callback(self, callback):
        self.callback_handler.remove_callback(callback)

    def add_callback(self, callback):
        self.callback_handler.add_callback(callback)


@pytest.mark.parametrize("disable_tqdm", [False, True])
def test_step_lines_replace_the_raw_metric_dict(restore_logging, capsys, disable_tqdm):
    from transformers import DefaultFlowCallback, PrinterCallback, ProgressCallback
    from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

    from argen.training import steplog

    printer = PrinterCallback if disable_tqdm else ProgressCallback
    handler = CallbackHandler([DefaultFlowCallback, printer], None, None, None, None)
    steplog.use_step_lines(FakeTrainer(handler))
    out = io.StringIO()
    console.configure(stream=out)
    args = SimpleNamespace(disable_tqdm=disable_tqdm)
    state, control = TrainerState(max_steps=12), TrainerControl()
    handler.on_train_begin(args, state, control)
    state.global_step = 3
    handler.on_log(args, state, control, dict(TRL_LOGS))
    handler.on_log(args, state, control, {"train_runtime": 20.5, "train_loss": 0.01})
    handler.on_train_end(args, state, control)
    printed = capsys.readouterr()
    assert "grad_norm" not in printed.out + printed.err + out.getvalue()
    lines = [line.split(" ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines[0].startswith("train: step 3/12  ahimsa 0.812  dharma 0.600")
    assert lines[1] == "train: 3 steps in 20.5 s"
    assert len(lines) == 2


def test_trl_sample_table_only_with_verbose(restore_logging, capsys):
    from trl.trainer import grpo_trainer

    from argen.training import steplog

    steplog.use_step_lines(FakeTrainer(SimpleNamespace(remove_callback=id, add_callback=id)))
    table = grpo_trainer.print_prompt_completions_sample
    sample = (["p"], ["c"], {"ahimsa": [0.5]}, [0.1], 1, None)
    console.configure(stream=io.StringIO())
    table(*sample)
    assert "Step 1" not in capsys.readouterr().out
    console.configure(verbose=True, stream=io.StringIO())
    table(*sample)
    assert "Step 1" in capsys.readouterr().out


def test_stage_tasks_run_between_stage_lines(restore_logging, tmp_path):
    """The Prefect pipeline's stages (tasks.stages._run) print the start and end lines, the
    evaluation named by its label; the end line says whether the library reused the output."""
    from argen.config import load_config
    from tasks import stages as t

    target = tmp_path / "evaluate" / "k1"

    class Task:
        def __init__(self, reused):
            self.reused = reused

        def with_options(self, **options):
            return lambda config, *args: t.ref("evaluate", target, self.reused)

    config = load_config("default", [])
    out = io.StringIO()
    console.configure(stream=out)
    t._run(Task(False), "evaluate baseline", config, "model", "test.parquet", "baseline")
    t._run(Task(True), "evaluate baseline", config, "model", "test.parquet", "baseline")
    lines = [line.split(" ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines[0] == "evaluate baseline: started"
    path = re.escape(str(target))
    assert re.fullmatch(rf"evaluate baseline: done in \d+\.\d s -> {path}", lines[1])
    assert lines[2] == "evaluate baseline: started"
    assert re.fullmatch(rf"evaluate baseline: reused \(\d+\.\d s\) -> {path}", lines[3])
    assert len(lines) == 4
