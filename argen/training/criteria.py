"""Train a reading grader's criterion head (`argen.judging.criteria`) on the labelled verdicts
per rubric criterion, and measure it held out by prompt.

    python -m argen.training.criteria [--grader DIR] [--held-out-origin PREFIX ...]
    python -m argen.training.criteria --backbone NAME --grader DIR [--epochs 2]

The first form adds a head to a trained grader: its backbone (with its adapter, where it was
tuned) stays as it is and the head learns from the pooled states of each criterion read after
its prompt and response. The second trains a new grader whose LoRA adapter learns the
propositions and the criteria together (a GPU's work). Items of train-split prompts train,
items of validation-split prompts measure: F1 of "met" overall, for positive and negative
criteria and per tag, and each proposition's F1 from the proposition heads alone against the
same heads strengthened by the graded criteria. Which propositions the criteria may raise is
fitted on the train prompts alone, read out of fold (`calibrated_tags`); a grader whose
backbone was tuned on them has no unseen fold, and its criteria raise nothing. The head and its
figures are written into the grader's folder, whose record (`reader.json`) is rewritten with
every file's SHA-256.
"""

import argparse
import json
import logging
import shutil
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import save_file

from argen.atomic import atomic_dir
from argen.data.labels import LABELS, items_sha256, read_labels
from argen.data.rubrics import RUBRICS, Criterion, read_rubrics
from argen.judging.criteria import (
    CRITERIA_HEADS,
    CriterionHead,
    criterion_states,
    head_over,
    layouts_of,
    pooled_spans,
    with_criteria,
)
from argen.judging.reader import (
    META,
    OUTPUTS,
    PACKAGED,
    Reader,
    load_reader,
    predict,
    reader_over,
    tuned_backbone,
    verify,
)
from argen.training.grader import (
    HEAD_EPOCHS,
    LORA,
    f1_interval,
    fit,
    held_out_split,
    measure,
    pooled_features,
    save,
    train_heads,
    write_record,
)

log = logging.getLogger(__name__)

CRITERION_EPOCHS = 400
"""Full-batch epochs of a criterion head over a backbone's states (`fit_head`)."""
FOLDS = 5
"""Folds of the train prompts for `out_of_fold`: each fold's items are read by heads trained on
the others."""


def graded_items(labels: pd.DataFrame, rubrics: dict[str, list[Criterion]]) -> pd.DataFrame:
    """The items with a verdict per criterion of their scenario's rubric, and that rubric
    (`criteria`); an item whose verdicts do not match its rubric's length is left out, named."""
    rows = labels[labels["criteria_met"].notna() & labels["scenario"].isin(set(rubrics))]
    rows = rows.assign(criteria=[rubrics[s] for s in rows["scenario"]])
    fits = [len(m) == len(c) for m, c in zip(rows["criteria_met"], rows["criteria"], strict=True)]
    for item in rows.loc[[not f for f in fits], "item"]:
        log.warning("%s: its verdicts do not match its scenario's rubric; left out", item)
    return rows[fits].reset_index(drop=True)


def states_of(encoder, tokenizer, items: pd.DataFrame) -> torch.Tensor:
    """Pooled states of every criterion of every item, in order."""
    rows = [
        (p, r, [c.text for c in crit])
        for p, r, crit in zip(items["prompt"], items["response"], items["criteria"], strict=True)
    ]
    return criterion_states(encoder, tokenizer, rows)


def verdicts(items: pd.DataFrame) -> np.ndarray:
    """Every item's verdicts, flattened in the order of `states_of`."""
    return np.array([bool(v) for met in items["criteria_met"] for v in met])


def fit_head(
    features: torch.Tensor, met: np.ndarray, encoder, epochs: int = CRITERION_EPOCHS, seed: int = 0
) -> CriterionHead:
    """A criterion head trained full-batch on pooled states (positives weighted up to the
    negatives' count, at most 10x)."""
    torch.manual_seed(seed)
    on = next(encoder.parameters()).device
    head = head_over(encoder).to(on)
    x = features.to(on)
    head.center.copy_(x.mean(0))
    head.scale.copy_(x.std(0) + 1e-6)
    y = torch.tensor(met, dtype=torch.float32, device=on)
    pos_weight = ((len(y) - y.sum()) / y.sum().clamp(min=1)).clamp(1, 10)
    bce = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = torch.optim.AdamW(head.parameters(), lr=3e-3, weight_decay=1e-2)
    head.train()
    with torch.enable_grad():
        for epoch in range(epochs):
            loss = bce(head(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if (epoch + 1) % 100 == 0:
                log.info(
                    "criterion head, epoch %d/%d: loss %.4f",
                    epoch + 1,
                    epochs,
                    float(loss.detach()),
                )
    return head.eval()


def fit_joint(
    train: pd.DataFrame,
    rubrics: dict[str, list[Criterion]],
    backbone: str,
    epochs: int,
    seed: int = 0,
    batch_size: int = 16,
) -> tuple:
    """A reader and a criterion head over one backbone whose LoRA adapter learns the
    propositions and the criteria together (`argen.training.grader.fit` with the criteria's
    loss on each batch's graded items); returns the reader, its tokenizer and the head."""
    graded = graded_items(train, rubrics).set_index("item")
    rows: list[tuple[str, str, list[str], list[bool]] | None] = [
        (p, r, [c.text for c in graded.at[i, "criteria"]], list(graded.at[i, "criteria_met"]))
        if i in graded.index
        else None
        for i, p, r in zip(train["item"], train["prompt"], train["response"], strict=True)
    ]
    made: list[CriterionHead] = []

    def criteria_loss(model, tokenizer):
        encoder = model.encoder
        on = next(encoder.parameters()).device
        head = head_over(encoder).to(on)
        features = criterion_states(encoder, tokenizer, [x[:3] for x in rows if x is not None])
        head.center.copy_(features.mean(0).to(on))
        head.scale.copy_(features.std(0).to(on) + 1e-6)
        met = torch.tensor([v for x in rows if x is not None for v in x[3]], dtype=torch.float32)
        pos_weight = ((len(met) - met.sum()) / met.sum().clamp(min=1)).clamp(1, 10)
        bce = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight.to(on))
        head.train()
        made.append(head)

        def loss(idx: list[int]) -> torch.Tensor:
            batch = [x for i in idx if (x := rows[i]) is not None]
            if not batch:
                return torch.zeros((), device=on)
            layouts = layouts_of(encoder, tokenizer, [x[:3] for x in batch])
            with torch.autocast(on.type, dtype=torch.bfloat16, enabled=on.type == "cuda"):
                pooled = pooled_spans(encoder, tokenizer, layouts)
            target = torch.tensor([v for x in batch for v in x[3]], dtype=torch.float32)
            return bce(head(pooled.float()), target.to(on))

        return list(head.parameters()), loss

    model, tokenizer = fit(train, backbone, epochs, seed, batch_size, also=criteria_loss)
    return model, tokenizer, made[0].eval()


@torch.inference_mode()
def probabilities(head: CriterionHead, features: torch.Tensor) -> np.ndarray:
    on = head.center.device
    return torch.sigmoid(head(features.to(on)).float()).cpu().numpy()


def prompt_folds(prompts: pd.Series, seed: int) -> np.ndarray:
    """Each row's fold (0 to FOLDS - 1), the same for every row of a prompt."""
    unique = np.array(sorted(prompts.unique()))
    shuffled = np.random.default_rng(seed).permutation(unique)
    fold = {prompt: i % FOLDS for i, prompt in enumerate(shuffled)}
    return prompts.map(fold).to_numpy()


def out_of_fold(
    model: Reader,
    tokenizer,
    train_all: pd.DataFrame,
    graded: pd.DataFrame,
    features: torch.Tensor,
    epochs: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The proposition heads' and the criterion head's probabilities for every graded train
    item (`features` its criteria's states), each from heads trained, over the grader's
    backbone, on the items of the other folds' prompts: what the reward's heads would say of a
    prompt they never saw (`no_unseen_fold` says where there is no such prompt)."""
    on = model.center.device
    pairs = pooled_features(model, tokenizer, train_all).to(on)
    row = pd.Series(np.arange(len(train_all)), index=train_all["item"])[graded["item"]].to_numpy()
    fold_all = prompt_folds(train_all["prompt"], seed)
    fold = fold_all[row]
    fold_criteria = np.repeat(fold, [len(c) for c in graded["criteria"]])
    met = verdicts(graded)
    props = np.zeros((len(graded), len(OUTPUTS)))
    prob = np.zeros(len(met))
    for k in range(FOLDS):
        torch.manual_seed(seed + k)
        reader = reader_over(model.encoder).to(on)
        rest = fold_all != k
        train_heads(reader, pairs[torch.from_numpy(rest)], train_all[rest], HEAD_EPOCHS)
        with torch.inference_mode():
            logits, _ = reader.heads(pairs[torch.from_numpy(row[fold == k])])
        props[fold == k] = torch.sigmoid(logits.float()).cpu().numpy()
        inside = torch.from_numpy(fold_criteria == k)
        head = fit_head(features[~inside], met[fold_criteria != k], model.encoder, epochs, seed)
        prob[fold_criteria == k] = probabilities(head, features[inside])
    return props, prob


def no_unseen_fold(train_all: pd.DataFrame, tuned: bool) -> str | None:
    """Why no fold of the train prompts is unseen by the grader, so that nothing can be read
    out of fold (None where one is): its backbone was tuned on all of them (heads read out of
    fold over it look better than they are), or they are fewer than the folds."""
    if tuned:
        return "the grader's backbone was tuned on every train prompt"
    if train_all["prompt"].nunique() < FOLDS:
        return f"fewer than {FOLDS} train prompts"
    return None


def uncalibrated(reason: str) -> dict:
    """The record of a criterion head whose tags could not be calibrated: it raises nothing."""
    log.warning("no calibration (%s): the criteria raise no proposition", reason)
    return {"calibration": None, "uncalibrated": reason, "strengthens": []}


def calibrated_tags(graded: pd.DataFrame, read: tuple[np.ndarray, np.ndarray]) -> dict:
    """The propositions whose F1 over the graded train items, read out of fold (`out_of_fold`:
    the heads' and the criteria's probabilities), is higher raised by their tag's criteria than
    from the heads alone; the record gives both F1s of every tag."""
    props, prob = read
    tags = sorted({c.tag for crit in graded["criteria"] for c in crit} & set(OUTPUTS[:-1]))
    record = {}
    for tag in tags:
        k = OUTPUTS.index(tag)
        truth = graded[tag].astype("float64").to_numpy()
        applies = ~np.isnan(truth)
        known = truth[applies].astype(bool)
        raised = strengthened(graded, prob, props, [tag])[applies, k]
        record[tag] = {
            "heads": f1_interval(known, props[applies, k] >= 0.5),
            "with_criteria": f1_interval(known, raised >= 0.5),
        }
    strengthens = [t for t, f in record.items() if f["with_criteria"]["f1"] > f["heads"]["f1"]]
    log.info("out of fold, the criteria raise F1 of: %s", ", ".join(strengthens) or "nothing")
    return {
        "calibration": {"folds": FOLDS, "items": len(graded), "tags": record},
        "strengthens": strengthens,
    }


def strengthened(
    items: pd.DataFrame, prob: np.ndarray, props: np.ndarray, tags: Collection[str]
) -> np.ndarray:
    """The proposition heads' probabilities raised by the graded criteria with `tags`."""
    starts = np.cumsum([0] + [len(c) for c in items["criteria"]])
    return np.array(
        [
            [
                with_criteria(
                    dict(zip(OUTPUTS, map(float, row), strict=True)),
                    crit,
                    prob[starts[i] : starts[i + 1]],
                    tags,
                )[name]
                for name in OUTPUTS
            ]
            for i, (row, crit) in enumerate(zip(props, items["criteria"], strict=True))
        ]
    ).reshape(len(items), len(OUTPUTS))


def figures(
    items: pd.DataFrame,
    met: np.ndarray,
    prob: np.ndarray,
    props: np.ndarray,
    strengthens: Collection[str],
) -> dict:
    """Held-out figures: "met" F1 overall, by sign and by tag; each proposition's F1 from the
    proposition heads alone, raised by every tag's graded criteria, and as the reward reads it
    (raised by the tags of `strengthens` only)."""
    criteria = [c for crit in items["criteria"] for c in crit]
    sign = np.array(["positive" if c.points > 0 else "negative" for c in criteria])
    tags = np.array([c.tag for c in criteria])
    guess = prob >= 0.5
    met_figures = {"all": f1_interval(met, guess)}
    for name in ("positive", "negative"):
        met_figures[name] = f1_interval(met[sign == name], guess[sign == name])
    by_tag = {t: f1_interval(met[tags == t], guess[tags == t]) for t in sorted(set(tags))}
    every = strengthened(items, prob, props, OUTPUTS)
    chosen = strengthened(items, prob, props, strengthens)
    propositions = {}
    for k, name in enumerate(OUTPUTS[:-1]):
        truth = items[name].astype("float64").to_numpy()
        applies = ~np.isnan(truth)
        known = truth[applies].astype(bool)
        propositions[name] = {
            "heads": f1_interval(known, props[applies, k] >= 0.5),
            "with_criteria": f1_interval(known, every[applies, k] >= 0.5),
            "reward": f1_interval(known, chosen[applies, k] >= 0.5),
        }
    return {
        "items": len(items),
        "prompts": int(items["prompt"].nunique()),
        "criteria": int(len(met)),
        "met": met_figures,
        "met_by_tag": by_tag,
        "propositions": propositions,
    }


def save_head(folder: Path, head: CriterionHead, record: dict) -> None:
    """The head and its record into the grader's folder, atomically, the folder's other files
    kept; `reader.json` is rewritten with every file's SHA-256."""
    meta = verify(folder)
    meta.pop("files")
    with atomic_dir(folder) as tmp:
        for path in folder.iterdir():
            if path.is_file() and path.name not in (META, CRITERIA_HEADS):
                shutil.copy2(path, tmp / path.name)
        state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
        save_file(state, tmp / CRITERIA_HEADS)
        write_record(tmp, {**meta, "criteria": record})


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--grader",
        type=Path,
        default=PACKAGED,
        help="the trained grader whose backbone the head reads (and whose folder it joins)",
    )
    parser.add_argument(
        "--backbone",
        help="instead, train a new grader on this backbone whose LoRA adapter learns the "
        "propositions and the criteria together (a GPU's work), into --grader",
    )
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--rubrics", type=Path, default=RUBRICS)
    parser.add_argument(
        "--held-out-origin",
        action="append",
        default=[],
        metavar="PREFIX",
        help="also measure on the held-out items whose origin starts with this (repeatable)",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        help=f"epochs of the head (default {CRITERION_EPOCHS}) or of --backbone (2)",
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def held_out_record(
    model, tokenizer, head: CriterionHead, held: pd.DataFrame, origins, strengthens
) -> dict:
    """The head's held-out figures (`figures`) on every graded held-out item and, with
    `origins`, on those whose origin starts with one of them."""
    pairs = list(zip(held["prompt"], held["response"], strict=True))
    props, _ = predict(model, tokenizer, pairs)
    prob = probabilities(head, states_of(model.encoder, tokenizer, held))
    record = {"held_out": figures(held, verdicts(held), prob, props, strengthens)}
    if origins:
        chosen = held["origin"].str.startswith(tuple(origins)).to_numpy()
        each = np.repeat(chosen, [len(c) for c in held["criteria"]])
        record["held_out_origins"] = {
            "origins": origins,
            **figures(held[chosen], verdicts(held)[each], prob[each], props[chosen], strengthens),
        }
    return record


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rubrics = read_rubrics(args.rubrics)
    train_all, held_all = held_out_split(read_labels(args.labels))
    train, held = graded_items(train_all, rubrics), graded_items(held_all, rubrics)
    log.info("criterion head: %d train items, %d held out", len(train), len(held))
    if args.backbone:
        epochs = args.epochs or 2
        model, tokenizer, head = fit_joint(train_all, rubrics, args.backbone, epochs, args.seed)
        settings = {"encoder": "tuned (LoRA) with the criteria", "seed": args.seed}
        settings |= {"epochs": epochs, "lora": LORA}
        figures_all = measure(model, tokenizer, held_all) if len(held_all) else {}
        save(model, train_all, figures_all, args.grader, settings, args.backbone)
        features = states_of(model.encoder, tokenizer, train)
    else:
        epochs = args.epochs or CRITERION_EPOCHS
        model, tokenizer, _ = load_reader(args.grader)
        features = states_of(model.encoder, tokenizer, train)
        head = fit_head(features, verdicts(train), model.encoder, epochs, args.seed)
    head_epochs = CRITERION_EPOCHS if args.backbone else epochs
    # the joint form's adapter is saved in the grader's folder already
    reason = no_unseen_fold(train_all, tuned_backbone(args.grader))
    calibrated = (
        uncalibrated(reason)
        if reason
        else calibrated_tags(
            train, out_of_fold(model, tokenizer, train_all, train, features, head_epochs, args.seed)
        )
    )
    record: dict = {
        "trained_on": {
            "items": len(train),
            "criteria": int(sum(map(len, train["criteria"]))),
            "labels_sha256": items_sha256(train),
        },
        "settings": {"epochs": epochs, "seed": args.seed, "joint": bool(args.backbone)},
        **calibrated,
    }
    if len(held):
        strengthens = calibrated["strengthens"]
        record |= held_out_record(model, tokenizer, head, held, args.held_out_origin, strengthens)
    save_head(args.grader, head, record)
    log.info(
        "criterion head -> %s; held out: %s",
        args.grader,
        json.dumps(record.get("held_out", {}).get("met", {}), default=str),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
