"""The data contracts: column names and allowed values, named in one place."""

TIERS = ("A", "B", "C")
"""A: emergency, urgent referral needed; B: see a clinician soon; C: routine."""

SCOPES = ("S0", "S1", "S2", "S3")
"""S0 clinical; S1 para-clinical; S2 tangential; S3 clearly outside medicine."""

CATEGORIES = ("clinical", "para_clinical", "out_of_domain", "mixed_domain", "adversarial")

SPLITS = ("train", "validation", "test")

SCENARIO_COLUMNS = ("id", "prompt", "tier", "scope", "category", "source", "split")
"""Columns of a scenarios parquet, in order."""

SOURCE_REQUIRED = ("id", "prompt", "tier", "scope", "category")
"""Fields every source row must have; ``source`` defaults to the file's name."""

GENERATION_COLUMNS = (
    "model",
    "response",
    "n_prompt_tokens",
    "n_response_tokens",
    "truncated",
    "generation_seconds",
    "deflects_clinical",
    "refers_tier_c",
    "echoes_system_prompt",
)
"""Columns evaluation adds per scenario before judging (the last three:
`argen.evaluation.indicators`)."""

JUDGE_COLUMNS = ("judge_ok", "judge_error", "judge", "rubric_version")
"""Bookkeeping every judged row carries; the judge's fields and scores sit before these."""
