from pathlib import Path

import pytest

from argen.config import load_config, recipe_path
from argen.errors import ArgenError


def test_default_recipe_loads_with_defaults():
    config = load_config()
    assert config.model.base == "smollm2-135m-instruct"
    assert config.curate.split.train == pytest.approx(0.7)
    assert config.storage.root == Path("artifacts")


def test_overrides_are_typed_and_nested():
    config = load_config(
        "default",
        ["curate.seed=7", "curate.split.test=0.3", "curate.split.train=0.6", "storage.root=/tmp/x"],
    )
    assert config.curate.seed == 7
    assert config.curate.split.test == pytest.approx(0.3)
    assert config.storage.root == Path("/tmp/x")


def test_unknown_key_is_named():
    with pytest.raises(ArgenError, match=r"curate\.sede: unknown key"):
        load_config("default", ["curate.sede=7"])


def test_bad_value_is_named():
    with pytest.raises(ArgenError, match=r"curate\.seed: .*got 'seven'"):
        load_config("default", ["curate.seed=seven"])


def test_split_must_sum_to_one():
    with pytest.raises(ArgenError, match="split fractions must sum to 1"):
        load_config("default", ["curate.split.test=0.5"])


def test_malformed_override():
    with pytest.raises(ArgenError, match="must look like section.field=value"):
        load_config("default", ["curate.seed"])


def test_unknown_recipe_lists_bundled_ones():
    with pytest.raises(ArgenError, match="unknown recipe 'nope'.*default"):
        recipe_path("nope")


def test_recipe_file_path(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("curate:\n  seed: 99\n")
    assert load_config(str(path)).curate.seed == 99
    path.write_text("curate: [1, 2\n")
    with pytest.raises(ArgenError, match="not valid YAML"):
        load_config(str(path))
