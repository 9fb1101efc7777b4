"""Train the reading grader (`argen.judging.reader`) on the labelled responses, and measure it.

    python -m argen.training.grader [--backbone NAME] [--finetune] [--out DIR] [--seed S]

Items of train-split prompts train it; items of validation-split prompts measure it, held out
by prompt: precision, recall and F1 per proposition with 95% bootstrap intervals, quality
accuracy, and how often a better answer to the same prompt scores above a worse one. The
backbone is the packaged MiniLM encoder (the CPU default) or any model spec (a packaged policy
such as qwen2.5-coder-0.5b-instruct, a local folder): a GPU's choice. The output folder
(default: the packaged grader, `argen/judging/graders/reader-minilm`) holds the heads, the LoRA
adapter where the backbone was tuned, and `reader.json`, which records the backbone, the SHA-256
of every file, the data it learned from and its held-out figures.
"""

import argparse
import json
import logging
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file

from argen.atomic import atomic_dir
from argen.config import TrainConfig
from argen.data.labels import LABELS, items_sha256, read_labels
from argen.hashing import file_sha256
from argen.judging.pairs import encode
from argen.judging.propositions import QUALITIES
from argen.judging.reader import (
    HEADS,
    META,
    MINILM,
    OUTPUTS,
    PACKAGED,
    Reader,
    device,
    load_backbone,
    predict,
    reader_over,
)
from argen.training.divergence import NonFiniteGuard

log = logging.getLogger(__name__)

HEAD_EPOCHS = 600
"""Full-batch epochs of the heads over a backbone as packaged (`fit_heads`)."""

LORA: dict = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.1, "target_modules": "all-linear"}
"""The adapter of a tuned backbone: every linear layer, whatever the architecture names it."""


def targets(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Proposition targets (NaN where one does not apply) and quality indices."""
    props = frame[list(OUTPUTS[:-1])].astype("float64").to_numpy()
    has_off = frame["has_off_domain"].astype("float64").to_numpy()[:, None]
    quality = frame["quality"].map(QUALITIES.index).to_numpy()
    return np.concatenate([props, has_off], axis=1), quality


def new_reader(backbone: str, tuned: bool) -> tuple[Reader, object]:
    """A backbone (with a fresh LoRA adapter when it is to be tuned) under fresh heads, on the
    GPU where there is one, and its tokenizer."""
    encoder, tokenizer = load_backbone(backbone, device(), tuned)
    if tuned:
        encoder = get_peft_model(encoder, LoraConfig(**LORA))  # type: ignore[arg-type]
    else:
        encoder.requires_grad_(False)
    model = reader_over(encoder)
    return model.to(device()), tokenizer


Objective = Callable[[list[int]], torch.Tensor]
"""A further loss on a batch of the training items (their indices), added to the reader's."""


def reader_objective(model: Reader, tokenizer, frame: pd.DataFrame) -> Objective:
    """The reader's own loss on a batch of `frame`'s items: the propositions (binary
    cross-entropy, positives weighted up to 10x, a proposition that does not apply left out)
    and the quality (cross-entropy)."""
    on = device()
    y, q = targets(frame)
    mask = ~np.isnan(y)
    positives = np.nansum(y, axis=0)
    pos_weight = np.clip((mask.sum(0) - positives) / np.maximum(positives, 1), 1, 10)
    bce = torch.nn.BCEWithLogitsLoss(
        reduction="none", pos_weight=torch.tensor(pos_weight, dtype=torch.float32, device=on)
    )
    prompts, responses = frame["prompt"].tolist(), frame["response"].tolist()

    def loss(idx: list[int]) -> torch.Tensor:
        batch = encode(tokenizer, [prompts[i] for i in idx], [responses[i] for i in idx], on)
        with torch.autocast(on, dtype=torch.bfloat16, enabled=on == "cuda"):
            pooled = model.pooled(**batch)
        logits, quality_logits = model.heads(pooled.float())
        target = torch.tensor(np.nan_to_num(y[idx]), dtype=torch.float32, device=on)
        weight = torch.tensor(mask[idx], dtype=torch.float32, device=on)
        prop_loss = (bce(logits.float(), target) * weight).sum() / weight.sum().clamp(min=1)
        quality_loss = torch.nn.functional.cross_entropy(
            quality_logits.float(), torch.tensor(q[idx], device=on)
        )
        return prop_loss + quality_loss

    return loss


def fit(
    frame: pd.DataFrame,
    backbone: str = MINILM,
    epochs: int = 6,
    seed: int = 0,
    batch_size: int = 32,
    also: Callable[[Reader, Any], tuple[list[torch.nn.Parameter], Objective]] | None = None,
) -> tuple:
    """Train a reader on `frame`'s items, the backbone tuned by a LoRA adapter; returns the
    model and tokenizer. `also`, given the fresh reader and tokenizer, returns further
    parameters and a loss the backbone learns together with the reader's (the criterion head)."""
    random.seed(seed)
    torch.manual_seed(seed)
    model, tokenizer = new_reader(backbone, tuned=True)
    standardise(model, pooled_features(model, tokenizer, frame).to(device()))
    extra_params, extra_loss = also(model, tokenizer) if also else ([], None)
    own_loss = reader_objective(model, tokenizer, frame)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad] + extra_params
    guard = NonFiniteGuard(TrainConfig.model_fields["skipped_share"].default)
    guard.watch([(f"p{i}", p) for i, p in enumerate(params)])
    optimizer = torch.optim.AdamW(params, lr=5e-4, weight_decay=0.01)
    steps = epochs * math.ceil(len(frame) / batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=5e-4, total_steps=steps, pct_start=0.1
    )
    for epoch in range(epochs):
        order = list(range(len(frame)))
        random.shuffle(order)
        total = 0.0
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            loss = own_loss(idx)
            if extra_loss is not None:
                loss = loss + extra_loss(idx)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            if guard.check_step(schedule.last_epoch + 1):  # a non-finite step is skipped
                total += float(loss.detach()) * len(idx)
            optimizer.step()
            schedule.step()
        log.info(
            "grader epoch %d/%d: loss %.4f (%d non-finite steps skipped so far)",
            *(epoch + 1, epochs, total / len(frame), len(guard.skipped_steps)),
        )
    return model.eval(), tokenizer


@torch.no_grad()
def pooled_features(model: Reader, tokenizer, frame: pd.DataFrame, batch_size: int = 32):
    """Each item's pooled pair states (items, layers, hidden) from the (frozen) backbone, batched
    by length."""
    on = model.center.device
    lengths = (frame["prompt"].str.len() + frame["response"].str.len()).to_numpy()
    order = np.argsort(lengths, kind="stable")
    out = torch.zeros(len(frame), *model.center.shape)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        rows = frame.iloc[idx]
        batch = encode(tokenizer, rows["prompt"].tolist(), rows["response"].tolist(), on)
        out[torch.as_tensor(idx)] = model.pooled(**batch).cpu()
    return out


def standardise(model: Reader, features: torch.Tensor) -> None:
    """Centre and scale each layer's pooled states by the training items' own."""
    model.center.copy_(features.mean(0))
    model.scale.copy_(features.std(0) + 1e-6)


def fit_heads(
    frame: pd.DataFrame, backbone: str = MINILM, epochs: int = HEAD_EPOCHS, seed: int = 0
) -> tuple:
    """A reader whose backbone stays as packaged and whose heads learn from its pooled states:
    what a CPU can afford (one forward pass per item); `fit` also tunes the backbone."""
    torch.manual_seed(seed)
    model, tokenizer = new_reader(backbone, tuned=False)
    model.eval()
    features = pooled_features(model, tokenizer, frame).to(device())
    return train_heads(model, features, frame, epochs), tokenizer


def train_heads(model: Reader, features: torch.Tensor, frame: pd.DataFrame, epochs: int) -> Reader:
    """`model`'s heads trained full-batch on the items' pooled states (`pooled_features`, on the
    heads' device), standardised by them; the backbone is not touched."""
    on = features.device
    standardise(model, features)
    y, q = targets(frame)
    mask = torch.tensor(~np.isnan(y), dtype=torch.float32, device=on)
    target = torch.tensor(np.nan_to_num(y), dtype=torch.float32, device=on)
    positives = target.sum(0)
    pos_weight = ((mask.sum(0) - positives) / positives.clamp(min=1)).clamp(1, 10)
    bce = torch.nn.BCEWithLogitsLoss(reduction="none", pos_weight=pos_weight)
    heads = [p for name, p in model.named_parameters() if not name.startswith("encoder.")]
    optimizer = torch.optim.AdamW(heads, lr=3e-3, weight_decay=1e-2)
    quality = torch.tensor(q, device=on)
    with torch.enable_grad():
        for epoch in range(epochs):
            model.drop.train()
            model.body.train()
            logits, quality_logits = model.heads(features)
            loss = (
                bce(logits, target) * mask
            ).sum() / mask.sum() + torch.nn.functional.cross_entropy(quality_logits, quality)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if (epoch + 1) % 100 == 0:
                log.info(
                    "grader heads, epoch %d/%d: loss %.4f", epoch + 1, epochs, float(loss.detach())
                )
    return model.eval()


def f1_interval(truth: np.ndarray, guess: np.ndarray, seed: int = 0, resamples: int = 1000) -> dict:
    """Precision, recall, F1 and a 95% percentile-bootstrap interval of F1 (items resampled)."""

    def scores(t, g):
        tp, fp, fn = int((t & g).sum()), int((~t & g).sum()), int((t & ~g).sum())
        precision = tp / (tp + fp) if tp + fp else math.nan
        recall = tp / (tp + fn) if tp + fn else math.nan
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else math.nan
        return precision, recall, f1

    precision, recall, f1 = scores(truth, guess)
    rng = np.random.default_rng(seed)
    draws = [
        scores(truth[i], guess[i])[2] for i in rng.integers(0, len(truth), (resamples, len(truth)))
    ]
    low, high = np.nanpercentile(draws, [2.5, 97.5]) if len(truth) else (math.nan, math.nan)
    return {
        "n": int(len(truth)),
        "positives": int(truth.sum()),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "f1_low": float(low),
        "f1_high": float(high),
    }


def measure(model: Reader, tokenizer, frame: pd.DataFrame) -> dict:
    """Held-out figures of a grader on `frame`'s items."""
    props, quality = predict(
        model, tokenizer, list(zip(frame["prompt"], frame["response"], strict=True))
    )
    return figures_of(frame, props, quality)


def figures_of(frame: pd.DataFrame, props: np.ndarray, quality: np.ndarray) -> dict:
    """Held-out figures from a grader's predictions (`predict`) on `frame`'s items, so that
    several subsets of one prediction are measured without reading the items again."""
    y, q = targets(frame)
    per = {}
    for k, name in enumerate(OUTPUTS):
        applies = ~np.isnan(y[:, k])
        per[name] = f1_interval(y[applies, k].astype(bool), props[applies, k] >= 0.5)
    expected = quality @ np.array([0.0, 0.5, 1.0])
    return {
        "items": len(frame),
        "prompts": int(frame["prompt"].nunique()),
        "propositions": per,
        "quality_accuracy": float((quality.argmax(1) == q).mean()),
        "pairwise": pairwise(frame.assign(expected=expected)),
    }


def pairwise(frame: pd.DataFrame) -> dict:
    """Of the pairs of answers to the same prompt whose quality differs, the share where the
    better one gets the higher expected quality."""
    wins = total = 0
    for _, group in frame.groupby("prompt"):
        rank = group["quality"].map(QUALITIES.index).to_numpy()
        score = group["expected"].to_numpy()
        for i in range(len(group)):
            for j in range(len(group)):
                if rank[i] > rank[j]:
                    total += 1
                    wins += score[i] > score[j]
    return {"pairs": total, "better_scored_higher": float(wins / total) if total else math.nan}


def save(
    model: Reader,
    frame: pd.DataFrame,
    figures: dict,
    out: Path,
    settings: dict,
    backbone: str = MINILM,
) -> Path:
    """The heads, the adapter where the backbone was tuned, and the record, atomically into
    `out`; the grader is named after its folder."""
    with atomic_dir(out) as tmp:
        if isinstance(model.encoder, PeftModel):
            model.encoder.save_pretrained(str(tmp))
        heads = {k: v.detach().cpu().contiguous() for k, v in model.head_state().items()}
        save_file(heads, tmp / HEADS)
        meta = {
            "name": out.name,
            "backbone": backbone,
            "outputs": list(OUTPUTS),
            "qualities": list(QUALITIES),
            "trained_on": {
                "items": len(frame),
                "prompts": int(frame["prompt"].nunique()),
                "labels_sha256": items_sha256(frame),
            },
            "settings": settings,
            "held_out": figures,
        }
        write_record(tmp, meta)
    return out


def write_record(folder: Path, meta: dict) -> None:
    """The grader's card (README.md, in place of peft's template) and `reader.json` with the
    SHA-256 of every file, which `argen.judging.reader.verify` checks before use."""
    (folder / "README.md").write_text(card(meta))
    files = {
        p.name: file_sha256(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != META
    }
    (folder / META).write_text(json.dumps({**meta, "files": files}, indent=2) + "\n")


def card(meta: dict) -> str:
    """What the grader is, what it learned from, how it scores held out, and its limits."""
    held = meta.get("held_out") or {}
    rows = [
        f"| {name} | {f['n']} | {f['positives']} | "
        f"{f['f1']:.2f} [{f['f1_low']:.2f}, {f['f1_high']:.2f}] |"
        for name, f in held.get("propositions", {}).items()
    ]
    trained = meta["trained_on"]
    return "\n".join(
        [
            f"# Reading grader: {meta['name']}",
            "",
            "A cross-encoder that reads a prompt and a response together and predicts the",
            "propositions of `argen/judging/propositions.py`, whether the prompt has an off-domain",
            "part, and the answer's quality (`argen/judging/reader.py`; `judge.backend: reader`).",
            f"Backbone: {meta['backbone']}, {meta['settings'].get('encoder')}; heads trained by",
            "`python -m argen.training.grader` on the labelled items of train-split prompts in",
            f"`data/labels/` ({trained['items']} items, {trained['prompts']} prompts). Labels were",
            "written by AI labelling agents from `data/GUIDE.md`; no clinician reviewed them.",
            "",
            f"Held out by prompt ({held.get('items')} items of {held.get('prompts')} validation",
            "prompts): F1 per output at a 0.5 threshold, 95% bootstrap interval.",
            "",
            "| output | items | true | F1 |",
            "| --- | ---: | ---: | --- |",
            *rows,
            "",
            f"Quality accuracy {held.get('quality_accuracy', float('nan')):.2f}; of "
            f"{held.get('pairwise', {}).get('pairs')} pairs of answers to one prompt whose",
            "quality differs, the better one scored higher in "
            f"{held.get('pairwise', {}).get('better_scored_higher', float('nan')):.0%}.",
            "",
            *criteria_card(meta.get("criteria")),
        ]
    )


def criteria_card(record: dict | None) -> list[str]:
    """The card's section on the criterion head (`argen.training.criteria`), where there is one:
    "met" F1 per sign, the propositions its criteria raise, and each proposition's F1 from the
    heads alone, raised by every tag's criteria, and as the reward reads it."""
    if not record or "held_out" not in record:
        return []
    held = record["held_out"]
    uncalibrated = f"; not calibrated: {record['uncalibrated']}" if "uncalibrated" in record else ""
    met = [
        f"{name} {f['f1']:.2f} ({f['positives']} of {f['n']})" for name, f in held["met"].items()
    ]
    rows = [
        f"| {name} | {f['heads']['f1']:.2f} | {f['with_criteria']['f1']:.2f} | "
        f"{f['reward']['f1']:.2f} |"
        for name, f in held["propositions"].items()
    ]
    return [
        "## Criterion head",
        "",
        "Grades each criterion of a bundled prompt's rubric (`data/rubrics/`) against the",
        f"response (`argen/judging/criteria.py`); trained on {record['trained_on']['criteria']}",
        f"verdicts. Held out ({held['criteria']} criteria of {held['items']} items), F1 of",
        f'"met": {"; ".join(met)}. The criteria raise {", ".join(record["strengthens"]) or "no"}',
        "proposition (those whose F1 they raised on train prompts read out of fold,",
        f"`calibrated_tags`){uncalibrated}.",
        "",
        "| proposition | F1, heads | F1, every tag's criteria | F1, the reward |",
        "| --- | ---: | ---: | ---: |",
        *rows,
        "",
    ]


def held_out_split(labels: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Items of train-split prompts to learn from and of validation-split prompts to measure
    on; a prompt in both is held out, whatever its split says."""
    train, held = labels[labels["split"] == "train"], labels[labels["split"] == "validation"]
    train = train[~train["prompt"].isin(set(held["prompt"]))]
    return train.reset_index(drop=True), held.reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--out", type=Path, default=PACKAGED)
    parser.add_argument(
        "--backbone",
        default=MINILM,
        help=f"{MINILM} (the packaged encoder, default) or a model spec: a packaged policy, a "
        "local folder",
    )
    parser.add_argument(
        "--finetune",
        action="store_true",
        help="also tune the backbone (a LoRA adapter): a GPU's work; without it only the heads "
        "learn, from one forward pass per item, which a CPU affords",
    )
    parser.add_argument("--epochs", type=int, default=6, help="epochs of --finetune")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    train, held_out = held_out_split(read_labels(args.labels))
    if args.finetune:
        model, tokenizer = fit(train, args.backbone, args.epochs, args.seed)
    else:
        model, tokenizer = fit_heads(train, args.backbone, seed=args.seed)
    figures = measure(model, tokenizer, held_out) if len(held_out) else {}
    settings = {"encoder": "tuned (LoRA)" if args.finetune else "as packaged", "seed": args.seed}
    if args.finetune:
        settings |= {"epochs": args.epochs, "lora": LORA}
    save(model, train, figures, args.out, settings, args.backbone)
    log.info(
        "grader -> %s; held out: %s",
        args.out,
        json.dumps(figures.get("propositions", {}), default=str)[:2000],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
