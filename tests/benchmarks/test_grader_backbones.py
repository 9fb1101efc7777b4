"""The grader comparison can be measured on one policy's held-out answers alone."""

import pandas as pd
import pytest

from benchmarks.grader_backbones import from_origins


def test_held_out_items_are_chosen_by_origin_prefix():
    held = pd.DataFrame(
        {"origin": ["policy:a-s0", "policy:a-s1", "policy:b", "written:good"], "item": range(4)}
    )
    assert from_origins(held, ["policy:a"])["item"].tolist() == [0, 1]
    assert from_origins(held, ["policy:b", "written:"])["item"].tolist() == [2, 3]
    with pytest.raises(SystemExit, match="no held-out item"):
        from_origins(held, ["policy:c"])
