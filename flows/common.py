"""What every flow shares: turning the run form's fields into config overrides."""

from argen.config import JudgeBackend


def form_overrides(
    judge_backend: JudgeBackend | None = None,
    model: str | None = None,
    max_steps: int | None = None,
    overrides: list[str] | None = None,
) -> list[str]:
    """``section.field=value`` overrides from the form: the common fields, then the free list."""
    extra = [f"judge.backend={judge_backend}"] if judge_backend else []
    extra += [f"model.base={model}"] if model else []
    extra += [f"train.max_steps={max_steps}"] if max_steps is not None else []
    return extra + list(overrides or [])
