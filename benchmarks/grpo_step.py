"""GRPO step time with ArGen's trainer settings: seconds per step, tokens/s, peak memory.

    python -m benchmarks.grpo_step [--recipe gpu] [--steps 5] [--random-weights]

It builds TRL's GRPOConfig from the recipe exactly as `argen train` does (`grpo_args`), on the
curated-style prompts of `data/scenarios`, with a cheap stand-in reward (response length) so
that the figure is the trainer's, not the judge's (the local judge's own rate is measured by
`benchmarks/judge_throughput.py`). ``--random-weights`` uses SmolLM2-135M's shape with random
weights, for machines without the packaged model.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOTrainer

from argen.config import load_config
from argen.train import grpo_args, training_dataset
from benchmarks.generation import SHAPE_DIR


def length_reward(completions, **_) -> list[float]:
    """Stand-in reward: prefers answers near 60 words (cheap, deterministic)."""
    words = [len(c[0]["content"].split()) for c in completions]
    return [1.0 - min(abs(w - 60) / 60, 1.0) for w in words]


class StepTimer(TrainerCallback):
    def __init__(self):
        self.start, self.times = 0.0, []

    def on_step_begin(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.times.append(time.perf_counter() - self.start)


def prompts_frame(n: int) -> pd.DataFrame:
    rows = [
        json.loads(line)
        for p in sorted(Path("data/scenarios").glob("*.jsonl"))
        for line in p.read_text().splitlines()
    ]
    return pd.DataFrame(rows[:: max(1, len(rows) // n)][:n])


def model_dir(random_weights: bool, tmp: Path) -> Path:
    if not random_weights:
        from argen.models import DEFAULT_MODEL, resolve_model

        return resolve_model(DEFAULT_MODEL)
    torch.manual_seed(0)
    model = (
        AutoModelForCausalLM.from_pretrained(SHAPE_DIR, dtype=torch.float32)
        if (SHAPE_DIR / "model.safetensors").is_file()
        else None
    )
    if model is None:
        from transformers import AutoConfig

        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(SHAPE_DIR))
    model.save_pretrained(tmp / "model")
    AutoTokenizer.from_pretrained(SHAPE_DIR).save_pretrained(tmp / "model")
    return tmp / "model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--recipe", default="gpu")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_config(
        args.recipe, [f"train.max_steps={args.steps}", "train.wandb_mode=disabled", *args.overrides]
    )
    on_gpu = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as tmp:
        base = model_dir(args.random_weights, Path(tmp))
        train = config.train
        grpo = grpo_args(config, Path(tmp) / "run", on_gpu)
        grpo.save_strategy = "no"
        grpo.log_completions = False
        grpo.report_to = []
        grpo.reward_weights = None
        timer = StepTimer()
        trainer = GRPOTrainer(
            model=str(base),
            reward_funcs=[length_reward],
            args=grpo,
            train_dataset=training_dataset(
                prompts_frame(train.prompts_per_step * (args.steps + 1))
            ),
            processing_class=AutoTokenizer.from_pretrained(base),
            peft_config=LoraConfig(
                r=train.lora.r,
                lora_alpha=train.lora.alpha,
                lora_dropout=train.lora.dropout,
                target_modules=train.lora.target_modules,
                task_type="CAUSAL_LM",
            ),
            callbacks=[timer],
        )
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
        log = pd.DataFrame(trainer.state.log_history)
    steady = timer.times[1:] or timer.times
    per_step = sum(steady) / len(steady)
    completions = train.prompts_per_step * train.num_generations
    tokens = (
        log["completions/mean_length"].dropna().iloc[1:].mean() * completions
        if len(log) > 1
        else float("nan")
    )
    device = torch.cuda.get_device_name() if on_gpu else "CPU"
    peak = torch.cuda.max_memory_allocated() / 2**30 if on_gpu else float("nan")
    print(
        f"device: {device}; recipe {args.recipe}: {completions} completions/step "
        f"({train.prompts_per_step} prompts x {train.num_generations}), max_completion_length "
        f"{train.max_completion_length}, LoRA r{train.lora.r}, bf16={on_gpu}"
    )
    print(f"step times (s): {[round(t, 2) for t in timer.times]}")
    print(
        f"mean step (after the first): {per_step:.2f} s; completion tokens/step "
        f"{tokens:.0f}; {tokens / per_step:.0f} tokens/s; peak GPU memory {peak:.2f} GiB"
    )


if __name__ == "__main__":
    main()
