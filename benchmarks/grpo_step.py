"""GRPO step time with ArGen's trainer settings, for each rollout engine and model shape.

    python -m benchmarks.grpo_step [--recipe gpu] [--steps 4] [--random-weights]
        [--shapes 135m,360m,1.7b] [--model SPEC_OR_DIR] [--engines transformers,fast]
        [--json out.json]

It builds TRL's GRPOConfig from the recipe exactly as `argen train` does (`grpo_args`), on the
curated-style prompts of `data/scenarios`, with a cheap stand-in reward (response length) so
that the figure is the trainer's, not the judge's. For each shape and engine it reports the
mean step time after the first, the generation share of it and generation tokens/s, and the
speed-up of each engine over `transformers` (TRL's own `generate` path) measured in the same
run. ``--random-weights`` builds SmolLM2 family shapes with random weights (throughput
depends on shapes, not values); without it the model of ``--model`` is used (a packaged
model's name, a local model directory or a hub id; default the packaged SmolLM2-135M).
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
from argen.generation.prompting import system_prompt
from argen.judging.scoring import make_backend
from argen.models import DEFAULT_MODEL, resolve_model
from argen.training.rewards import JudgeRewards
from argen.training.rollouts import engine_rollouts
from argen.training.train import grpo_args, training_dataset
from benchmarks.generation import SHAPE_DIR, shape_config


def length_reward(completions, **_) -> list[float]:
    """Stand-in reward: prefers answers near 60 words (cheap, deterministic)."""
    words = [len(c[0]["content"].split()) for c in completions]
    return [1.0 - min(abs(w - 60) / 60, 1.0) for w in words]


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class StepTimer(TrainerCallback):
    def __init__(self):
        self.start, self.times = 0.0, []

    def on_step_begin(self, args, state, control, **kwargs):
        sync()
        self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        sync()
        self.times.append(time.perf_counter() - self.start)


def timed(function, record: list):
    """`function`, with the wall time of each call appended to `record`."""

    def wrapper(*args, **kwargs):
        sync()
        start = time.perf_counter()
        result = function(*args, **kwargs)
        sync()
        record.append(time.perf_counter() - start)
        return result

    return wrapper


def prompts_frame(n: int) -> pd.DataFrame:
    rows = [
        json.loads(line)
        for p in sorted(Path("data/scenarios").glob("*.jsonl"))
        for line in p.read_text().splitlines()
    ]
    return pd.DataFrame(rows[:: max(1, len(rows) // n)][:n])


def build_model(shape: str | None, on_gpu: bool, model_spec: str = DEFAULT_MODEL):
    """A random-weight SmolLM2 family model of `shape`, or (None) the model of `model_spec`;
    with the directory its tokenizer comes from."""
    dtype = torch.bfloat16 if on_gpu else torch.float32
    device = torch.device("cuda" if on_gpu else "cpu")
    if shape is None:
        path = resolve_model(model_spec)
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype), path
    torch.manual_seed(0)
    with device:
        model = AutoModelForCausalLM.from_config(shape_config(shape), dtype=dtype)
    return model, SHAPE_DIR


def reward_setup(config, reward: str) -> tuple[list, list[float] | None]:
    """Reward functions and weights: the stand-in length reward or the configured judge's."""
    if reward == "length":
        return [length_reward], None
    weights = config.judge.weights
    judge = JudgeRewards(make_backend(config.judge), weights.model_dump(), None)
    return judge.functions(), [weights.ahimsa, weights.dharma, weights.helpfulness]


def measure(
    config,
    shape: str | None,
    engine: str,
    steps: int,
    on_gpu: bool,
    reward: str,
    model_spec: str = DEFAULT_MODEL,
) -> dict:
    """Train `steps` GRPO steps; step and generation times after the first step."""
    train = config.train
    model, tokenizer_dir = build_model(shape, on_gpu, model_spec)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    with tempfile.TemporaryDirectory() as tmp:
        grpo = grpo_args(config, Path(tmp) / "run", on_gpu)
        grpo.save_strategy, grpo.log_completions, grpo.report_to = "no", False, []
        reward_funcs, grpo.reward_weights = reward_setup(config, reward)
        grpo.model_init_kwargs = None
        torch.manual_seed(train.seed)
        timer, generation = StepTimer(), []
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward_funcs,
            args=grpo,
            train_dataset=training_dataset(
                prompts_frame(train.prompts_per_step * (steps + 1)),
                system_prompt(config.generation),
            ),
            processing_class=tokenizer,
            peft_config=LoraConfig(
                r=train.lora.r,
                lora_alpha=train.lora.alpha,
                lora_dropout=train.lora.dropout,
                target_modules=train.lora.target_modules,
                task_type="CAUSAL_LM",
            ),
            callbacks=[timer],
            rollout_func=engine_rollouts(tokenizer) if engine == "fast" else None,
        )
        trainer._generate = timed(trainer._generate, generation)
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
        log = pd.DataFrame(trainer.state.log_history)
    completions = train.prompts_per_step * train.num_generations
    tokens = log["completions/mean_length"].dropna().iloc[1:].mean() * completions
    step = sum(timer.times[1:]) / len(timer.times[1:])
    gen = sum(generation[1:]) / len(generation[1:])
    result = {
        "shape": shape or model_spec,
        "engine": engine,
        "first_step_s": timer.times[0],
        "step_s": step,
        "generation_s": gen,
        "completion_tokens_per_step": tokens,
        "generation_tokens_per_s": tokens / gen,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if on_gpu else float("nan"),
        "reward_mean": log["reward"].dropna().tolist(),
        "rewards": {c: log[c].dropna().tolist() for c in log if c.startswith("rewards/")},
    }
    del trainer, model
    if on_gpu:
        torch.cuda.empty_cache()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--recipe", default="gpu")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--shapes", default="135m")
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="without --random-weights: packaged model name, model directory or hub id",
    )
    parser.add_argument("--engines", default="transformers,fast")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--reward", choices=["length", "judge"], default="length", help="judge: config's judge"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_config(
        args.recipe, [f"train.max_steps={args.steps}", "train.wandb_mode=disabled", *args.overrides]
    )
    on_gpu = torch.cuda.is_available()
    train = config.train
    print(
        f"device: {torch.cuda.get_device_name() if on_gpu else 'CPU'}; recipe {args.recipe}: "
        f"{train.prompts_per_step} prompts x {train.num_generations} completions/step, "
        f"max_completion_length {train.max_completion_length}, LoRA r{train.lora.r}, "
        f"bf16={on_gpu}",
        flush=True,
    )
    results = []
    shapes = args.shapes.split(",") if args.random_weights else [None]
    for shape in shapes:
        for engine in args.engines.split(","):
            result = measure(config, shape, engine, args.steps, on_gpu, args.reward, args.model)
            base = next((r for r in results if r["shape"] == result["shape"]), result)
            result["step_speedup"] = base["step_s"] / result["step_s"]
            result["generation_speedup"] = (
                result["generation_tokens_per_s"] / base["generation_tokens_per_s"]
            )
            results.append(result)
            print(
                f"{result['shape']:>14} {engine:>12}: step {result['step_s']:.2f} s "
                f"(first {result['first_step_s']:.1f} s), generation "
                f"{result['generation_s']:.2f} s "
                f"= {result['generation_tokens_per_s']:.0f} tokens/s, peak "
                f"{result['peak_gib']:.1f} GiB; vs transformers: step x"
                f"{result['step_speedup']:.2f}, generation x{result['generation_speedup']:.2f}",
                flush=True,
            )
            if args.json:
                args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
