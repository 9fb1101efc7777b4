"""How a grader's backbone reads a (prompt, response) pair: one tokenisation for the reader's
proposition heads and the criterion grader, so that on a causal backbone the criteria can
follow the very tokens the heads read and both are read in one forward pass."""

from collections.abc import Sequence

MAX_LENGTH = 384
"""Tokens of a pair; the response is cut, never the prompt."""
RESPONSE_MARK = "\n\nResponse:\n"
"""Ends the prompt where a backbone's tokenizer has no separator of its own (causal LMs)."""


def is_causal(tokenizer) -> bool:
    """Whether the backbone reads left to right (no [CLS]/[SEP] pair form of its own): then a
    token's states do not depend on what follows it."""
    return tokenizer.sep_token_id is None or tokenizer.cls_token_id is None


def first_texts(tokenizer, prompts: Sequence[str]) -> list[str]:
    """The pair's first sequence: the prompt, marked as ended where the backbone is causal."""
    return [p + RESPONSE_MARK for p in prompts] if is_causal(tokenizer) else list(prompts)


def encode(tokenizer, prompts: Sequence[str], responses: Sequence[str], device) -> dict:
    """A padded batch of pairs, on `device`."""
    batch = tokenizer(
        first_texts(tokenizer, prompts),
        list(responses),
        truncation="only_second",
        max_length=MAX_LENGTH,
        padding=True,
        return_tensors="pt",
    )
    return {k: v.to(device) for k, v in batch.items()}


def pair_ids(tokenizer, prompt: str, response: str) -> list[int]:
    """One pair's token ids, exactly as `encode` gives them without padding."""
    (first,) = first_texts(tokenizer, [prompt])
    return tokenizer(first, response, truncation="only_second", max_length=MAX_LENGTH)["input_ids"]
