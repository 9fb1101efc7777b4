"""What the reading reward costs for one GRPO step's completions, with and without its rubric.

    python -m benchmarks.reward_cost GRADER [GRADER ...] [--completions 64] [--repeats 5]
    python -m benchmarks.reward_cost --fresh BACKBONE [...]

For each grader folder: the median seconds of its proposition heads alone (`predict`), of the
heads and the rubric graded in a pass of its own (`predict` and `grade_rubrics`), and of
everything the reward reads (`read_pairs`, which on a causal backbone reads the pair and its
rubric in one pass) over `--completions` labelled answers to bundled prompts (a step's worth),
after one warm-up call. `--fresh BACKBONE` times a grader with untrained heads and
criterion head on that backbone (what it costs does not depend on its weights), made in a
temporary folder. Prints one JSON line per grader.
"""

import argparse
import functools
import json
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from argen.data.labels import read_labels
from argen.judging.criteria import head_over, rubrics_by_prompt
from argen.judging.reader import (
    device,
    grade_rubrics,
    load_backbone,
    load_grader,
    predict,
    read_pairs,
    reader_over,
)
from argen.training.criteria import save_head
from argen.training.grader import save


def median_seconds(call, repeats: int) -> float:
    """Median wall time of `call` over `repeats` runs, after one warm-up."""
    call()
    times = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        started = time.perf_counter()
        call()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def fresh_grader(backbone: str, folder: Path) -> Path:
    """A grader on `backbone` with untrained heads and criterion head, saved into `folder`."""
    encoder, _ = load_backbone(backbone, device())
    empty = pd.DataFrame({"item": [], "prompt": []})
    save(reader_over(encoder), empty, {}, folder, {"encoder": "untrained heads"}, backbone)
    save_head(folder, head_over(encoder), {"trained_on": {"criteria": 0}, "strengthens": []})
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graders", nargs="*", type=Path)
    parser.add_argument("--fresh", action="append", default=[], metavar="BACKBONE")
    parser.add_argument("--completions", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    labels = read_labels()
    labels = labels[labels["prompt"].isin(rubrics_by_prompt())]
    sample = labels.sample(args.completions, random_state=0)
    pairs = list(zip(sample["prompt"], sample["response"], strict=True))
    temporary = Path(tempfile.mkdtemp())
    fresh = [fresh_grader(b, temporary / f"fresh-{i}") for i, b in enumerate(args.fresh)]
    for folder in [*args.graders, *fresh]:
        grader = load_grader(folder)
        heads = median_seconds(
            functools.partial(predict, grader.model, grader.tokenizer, pairs), args.repeats
        )

        def apart(grader=grader) -> None:
            predict(grader.model, grader.tokenizer, pairs)
            grade_rubrics(grader, pairs)

        two_passes = median_seconds(apart, args.repeats)
        whole = median_seconds(functools.partial(read_pairs, grader, pairs), args.repeats)
        line = {
            "grader": str(folder),
            "criterion_head": grader.criteria is not None,
            "completions": len(pairs),
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "heads_seconds": round(heads, 4),
            "two_passes_seconds": round(two_passes, 4),
            "reward_seconds": round(whole, 4),
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
