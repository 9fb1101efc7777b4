"""The warm start on a GPU: train it on the demonstrations, then answer the validation prompts
with the base, the warm-started policy and (optionally) GRPO continued from it, for reading.

    python -m benchmarks.warm_start_run --recipe gpu-qwen0.5b --out DIR [--grpo-steps N]
        [--set KEY=VALUE ...]

Writes DIR/answers.jsonl (one line per validation prompt: the scenario and each policy's greedy
answer, as evaluation generates them), DIR/sft-manifest.json, DIR/sft-log.parquet and, with
GRPO, DIR/grpo-manifest.json and DIR/grpo-validation.parquet. Every choice is made on the
validation split; the test split is not read.
"""

import argparse
import json
import logging
import shutil
import time
from pathlib import Path

import pandas as pd
import torch

from argen.config import load_config
from argen.data.curate import curate
from argen.generation.generate import generate, load_model
from argen.models import resolve_model
from argen.outputs import Adapter, CuratedSplits
from argen.training.merge import merge
from argen.training.sft import warm_start
from argen.training.train import train

log = logging.getLogger("warm_start_run")


def answers(model_dir: Path, prompts: list[str], config) -> list[str]:
    """Greedy answers, as evaluation generates them."""
    model, tokenizer = load_model(model_dir, precision=config.generation.precision)
    out = [g.response for g in generate(model, tokenizer, prompts, config.generation)]
    del model
    torch.cuda.empty_cache()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="gpu-qwen0.5b")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--grpo-steps", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = load_config(args.recipe, ["sft.enabled=true", *args.overrides])
    work = args.out / "work"
    splits = CuratedSplits(curate(config.curate, work / "curate"))
    base = resolve_model(config.model.base)
    started = time.perf_counter()
    adapter = warm_start(config, base, splits.train, splits.validation, work / "sft")
    sft_seconds = time.perf_counter() - started
    frame = pd.read_parquet(splits.validation)
    prompts = frame["prompt"].tolist()
    policies = {"base": base, "sft": merge(base, adapter, work / "sft-merged")}
    manifests = {"sft": Adapter(adapter).record() | {"seconds": sft_seconds}}
    shutil.copy(Adapter(adapter).training_log, args.out / "sft-log.parquet")
    if args.grpo_steps:
        grpo = config.model_copy(deep=True)
        grpo.train.max_steps = args.grpo_steps
        grpo.train.validation_steps = args.grpo_steps
        grpo.train.save_steps = args.grpo_steps
        started = time.perf_counter()
        out = train(grpo, base, splits.train, splits.validation, work / "grpo", warm_start=adapter)
        manifests["grpo"] = Adapter(out).record() | {"seconds": time.perf_counter() - started}
        shutil.copy(Adapter(out).validation_log, args.out / "grpo-validation.parquet")
        policies["grpo"] = merge(base, out, work / "grpo-merged")
    columns = {name: answers(path, prompts, config) for name, path in policies.items()}
    keep = ["id", "prompt", "tier", "scope", "category"]
    rows = frame[keep].assign(**columns).to_dict("records")
    (args.out / "answers.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    )
    for name, record in manifests.items():
        (args.out / f"{name}-manifest.json").write_text(json.dumps(record, indent=2))
    log.info("done: %s", {k: round(v.get("seconds", 0)) for k, v in manifests.items()})


if __name__ == "__main__":
    main()
