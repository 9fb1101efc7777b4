"""The terminal: the one place that decides what a run prints.

By default the console shows the library's own INFO lines (one when each stage starts and ends,
one per training step, the verdict) and anything at WARNING or above; libraries' INFO chatter
(Prefect's run bookkeeping, every HTTP request httpx makes to the Prefect API, model loading
bars, deprecation warnings) appears only with ``verbose``. Lines are written through tqdm, so a
progress bar on the same terminal is cleared and redrawn around them instead of being broken.
Records logged with ``extra=UI_ONLY`` reach other handlers (the Prefect UI) but not
the terminal, where a progress bar already shows the same thing.

No heavy imports here: `argen curate` configures its console without paying for torch.
"""

import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from argen.outputs import Report

log = logging.getLogger(__name__)

LIBRARY = "argen"
HTTP_LOGGERS = ("httpx", "httpcore")
"""HTTP clients that log every request at INFO (Prefect's API calls, one per log batch)."""
QUIET_BARS = ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS")
"""Hugging Face's own bars (weight loading, dataset maps): gone in a blink, shown with -v."""
UI_ONLY = {"console": False}
"""``extra=`` of a progress record that the Prefect UI needs but a terminal bar already shows."""
BRIEF = "%(asctime)s %(message)s"
DETAILED = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ConsoleFilter(logging.Filter):
    """What reaches the terminal: everything when verbose; else the library's INFO lines not
    marked ``console=False``, and other loggers' warnings and errors (not Python warnings)."""

    def __init__(self, verbose: bool = False):
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if self.verbose:
            return True
        if record.levelno >= logging.WARNING:
            return record.name != "py.warnings"
        ours = record.name == LIBRARY or record.name.startswith(LIBRARY + ".")
        return ours and getattr(record, "console", True)


class ConsoleHandler(logging.StreamHandler):
    """Writes each line with `tqdm.write`, which lifts any progress bar above the line and
    redraws it below, so bars and log lines never share a row. Without a stream it writes to
    whatever `sys.stderr` is at the time (never a stream replaced since)."""

    def __init__(self, stream=None):
        super().__init__(stream)
        self.follow_stderr = stream is None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr if self.follow_stderr else self.stream
            tqdm.write(self.format(record), file=stream)
        except Exception:
            self.handleError(record)


def configure(verbose: bool = False, stream=None) -> logging.Handler:
    """Set up the terminal for a command (idempotent: replaces an earlier console handler);
    returns the handler. `verbose` shows every library's INFO lines and the library's DEBUG."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, ConsoleHandler)]:
        root.removeHandler(old)
    handler = ConsoleHandler(stream)
    handler.setFormatter(logging.Formatter(DETAILED if verbose else BRIEF, "%H:%M:%S"))
    handler.addFilter(ConsoleFilter(verbose))
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger(LIBRARY).setLevel(logging.DEBUG if verbose else logging.INFO)
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    logging.captureWarnings(True)
    if not verbose:
        for variable in QUIET_BARS:
            os.environ.setdefault(variable, "1")
    return handler


def duration(seconds: float) -> str:
    """A short human duration: 0.4 s, 12.3 s, 4 min 05 s, 1 h 02 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


@dataclass
class Span:
    """A running stage: its output directory (set it once known) and whether it was reused."""

    name: str
    out: Path | str | None = None
    reused: bool = False


@contextmanager
def stage(name: str, out: Path | str | None = None, reused: bool = False) -> Iterator[Span]:
    """One line when the stage starts and one when it ends, with its duration and output. A
    stage known beforehand to be reused gets the end line only; one that learns it while
    running (a Prefect task) sets ``span.reused``, and its end line says so."""
    span = Span(name, out, reused)
    if not reused:
        log.info("%s: started", name)
    started = time.perf_counter()
    try:
        yield span
    except BaseException as exc:
        log.error("%s: failed after %s (%s)", name, duration(time.perf_counter() - started), exc)
        raise
    took = duration(time.perf_counter() - started)
    state = f"reused ({took})" if span.reused else f"done in {took}"
    log.info("%s: %s -> %s", name, state, span.out)


def step_line(step: int, max_steps: int, logs: Mapping[str, float | None], seconds: float) -> str:
    """One training step from TRL's logged metrics: the mean reward per dimension (one per
    reward function, ``rewards/<name>/mean``), the KL to the reference (- without one: beta 0)
    and the wall time per step."""
    rewards = [
        f"{key.split('/')[1]} {_number(value)}"
        for key, value in logs.items()
        if key.startswith("rewards/") and key.endswith("/mean")
    ]
    kl = logs.get("kl")
    parts = [f"train: step {step}/{max_steps}", *rewards, f"kl {_number(kl, '.4f')}"]
    return "  ".join([*parts, f"{seconds:.1f} s/step"])


def _number(value: float | None, spec: str = ".3f") -> str:
    """A metric for a console line; TRL logs None when every sample's value was missing."""
    return "-" if value is None else format(value, spec)


SMOKE_RUN_LINE = (
    "a smoke run: a few CPU training steps show the pipeline working and may teach the form of "
    "an answer, not medicine; reports/gpu-example/ shows a real run"
)


def final_lines(outcome: str, message: str, report_dir: Path | str) -> str:
    """The end of a run: how it ended, the report's verdict per dimension (difference aligned
    minus baseline) with its release gate, and where the report and its reading sheet are."""
    report_dir = Path(report_dir)
    summary = Report(report_dir).record()
    calls = [f"{v['dimension']} {v['call']} ({v['difference']:+.3f})" for v in summary["verdict"]]
    gate = "passed" if summary["gate_passed"] else "failed"
    lines = [
        f"{outcome}: {message}",
        f"verdict: {', '.join(calls)}; release gate {gate}",
        f"report: {Report(report_dir).markdown}",
    ]
    if summary.get("reading_sheet"):
        lines.append(f"read before promoting: {Report(report_dir).reading_sheet}")
    if summary.get("smoke_run"):
        lines.append(SMOKE_RUN_LINE)
    return "\n".join(lines)
