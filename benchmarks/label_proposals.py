"""How often curation's proposed labels match real ones: `data/scenarios` is curated with the
default recipe, labels are proposed for the validation and test splits' prompts from the train
split's labels alone, and each field is compared with the real label.

Command: `.venv/bin/python -m benchmarks.label_proposals`; exits 1 when the figures differ from
those the package states (`argen.data.proposals.MEASURED`, quoted in every data card).
"""

import logging
import sys

from argen.config import CurateConfig
from argen.data.curate import curate_frames
from argen.data.proposals import MEASURED, agreement
from argen.judging.embeddings import embed

log = logging.getLogger(__name__)


def measure() -> dict[str, dict]:
    """Curate `data/scenarios` with the default recipe and measure `agreement` on it."""
    scenarios = curate_frames(CurateConfig()).scenarios
    return agreement(scenarios, embed(scenarios["prompt"].tolist()))


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    measured = measure()
    for split, figures in measured.items():
        log.info("%s: %s (stated: %s)", split, figures, MEASURED[split])
    return 0 if measured == MEASURED else 1


if __name__ == "__main__":
    sys.exit(main())
