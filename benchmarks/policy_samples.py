"""Sample answers of this project's own policies to train and validation prompts, for labelling.

    python -m benchmarks.policy_samples --model M [--adapter DIR] --origin NAME --out FILE.jsonl
        [--samples 2] [--temperature 0.9] [--system-prompt full|brief] [--max-new-tokens 200]
        [--splits train validation] [--set KEY=VALUE ...]

The grader must learn from what a reward actually sees: answers of the base and aligned
policies (`data/GUIDE.md`, section 4). This writes one JSON line per sampled answer, with the
scenario's facts and no judge score (labels come from reading, never from a judge), to be
labelled under `data/labels/`. Test and holdout prompts are never sampled. With `--adapter` the
LoRA adapter is merged into the model first (`argen.training.merge`).
"""

import argparse
import json
import logging
import tempfile
from pathlib import Path

import pandas as pd

from argen.config import load_config
from argen.data.curate import curate_frames
from argen.generation.generate import generate, load_model
from argen.models import resolve_model
from argen.training.merge import merge

log = logging.getLogger("policy_samples")


def scenarios(config, splits: list[str]) -> pd.DataFrame:
    """The curated scenarios of `splits` (never test), with the off-domain flag labellers need."""
    if "test" in splits:
        raise SystemExit("test prompts are never sampled for labelling")
    frame = curate_frames(config.curate).scenarios
    frame = frame[frame["split"].isin(splits)].reset_index(drop=True)
    return frame.assign(
        has_off_domain=frame["category"].isin(["mixed_domain", "out_of_domain"])
        | frame["scope"].eq("S3")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="packaged name, HF dir or hub id")
    parser.add_argument("--adapter", type=Path, help="LoRA adapter to merge first")
    parser.add_argument("--origin", required=True, help="e.g. smollm2-135m-base")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.9)
    parser.add_argument("--system-prompt", default="full", choices=["full", "brief"])
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--splits", nargs="+", default=["train", "validation"])
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    config = load_config(
        "default",
        [
            f"generation.temperature={args.temperature}",
            f"generation.system_prompt={args.system_prompt}",
            f"generation.max_new_tokens={args.max_new_tokens}",
            *args.overrides,
        ],
    )
    frame = scenarios(config, args.splits)
    model_dir = resolve_model(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        if args.adapter:
            model_dir = merge(model_dir, args.adapter, Path(tmp) / "merged")
        model, tokenizer = load_model(model_dir)
        rows = []
        for sample in range(args.samples):
            settings = config.generation.model_copy(
                update={"seed": config.generation.seed + sample}
            )
            answers = generate(model, tokenizer, frame["prompt"].tolist(), settings)
            for scenario, answer in zip(frame.to_dict("records"), answers, strict=True):
                rows.append(
                    {
                        "item": f"{args.origin}-{scenario['id']}-s{sample}",
                        "scenario": scenario["id"],
                        "split": scenario["split"],
                        "prompt": scenario["prompt"],
                        "tier": scenario["tier"],
                        "scope": scenario["scope"],
                        "category": scenario["category"],
                        "has_off_domain": bool(scenario["has_off_domain"]),
                        "response": answer.response,
                        "truncated": answer.truncated,
                        "origin": f"policy:{args.origin}",
                    }
                )
            log.info("sample %d: %d answers", sample, len(answers))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    log.info("%d answers -> %s", len(rows), args.out)


if __name__ == "__main__":
    main()
