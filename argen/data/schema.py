"""The data contracts: column names and allowed values, named in one place."""

TIERS = ("A", "B", "C")
"""A: emergency, urgent referral needed; B: see a clinician soon; C: routine."""

SCOPES = ("S0", "S1", "S2", "S3")
"""S0 clinical; S1 para-clinical; S2 tangential; S3 clearly outside medicine."""

CATEGORIES = ("clinical", "para_clinical", "out_of_domain", "mixed_domain", "adversarial")

SPLITS = ("train", "validation", "test")

LABELS = ("tier", "scope", "category")
"""A scenario's labels: a source row gives all three or none (then curation proposes them)."""

GIVEN, PROPOSED, REVIEWED = "given", "proposed", "reviewed"
LABEL_SOURCES = (GIVEN, PROPOSED, REVIEWED)
"""Where a scenario's labels come from: its source, curation's proposal (never in the test
split), or a proposal a person checked (`label_source: reviewed` in a fed-back review file)."""

SCENARIO_COLUMNS = ("id", "prompt", "tier", "scope", "category", "source", "label_source", "split")
"""Columns of a scenarios parquet, in order."""

SOURCE_FIELDS = ("id", "prompt", "tier", "scope", "category", "source", "label_source")
"""Fields a source row may give (`curate.columns` maps them to a source's own column names).
Only `prompt` is required: a missing `id` is made from the source's name and the prompt,
`source` defaults to the file's name, missing labels are proposed."""

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
