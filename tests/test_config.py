from pathlib import Path

import pytest
import yaml

from argen.config import RECIPES_DIR, Config, load_config, recipe_path, resolved_sha256
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


@pytest.mark.parametrize("value", ["[1, 2", "{a: 1", "'open", "a: b: c", "@x", "\t- x"])
def test_an_override_value_that_is_not_yaml_is_named(value):
    message = r"override .curate\.sources=.*.: the value is not valid YAML"
    with pytest.raises(ArgenError, match=message):
        load_config("default", [f"curate.sources={value}"])


def test_a_recipe_extends_another_and_states_only_what_it_changes(tmp_path):
    gpu = load_config("gpu")
    qwen = load_config("gpu-qwen0.5b")
    assert qwen.model.base == "qwen2.5-coder-0.5b-instruct"
    assert qwen.train.learning_rate == 3.0e-5
    assert qwen.train.penalties["refers_tier_c"] == 0.5 and not gpu.train.penalties
    assert qwen.train.beta == gpu.train.beta
    assert qwen.judge.weights == gpu.judge.weights
    assert qwen.train.lora == gpu.train.lora
    child = tmp_path / "child.yaml"
    child.write_text("extends: gpu-qwen1.5b\ntrain: {max_steps: 3}\n")
    loaded = load_config(str(child), ["train.beta=0.01"])
    assert (loaded.model.base, loaded.train.max_steps, loaded.train.beta) == (
        "qwen2.5-coder-1.5b-instruct",
        3,
        0.01,
    )


def test_a_recipe_that_extends_itself_is_a_clear_error(tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.write_text(f"extends: {loop}\n")
    with pytest.raises(ArgenError, match="extends .* which extends it again"):
        load_config(str(loop))
    missing = tmp_path / "orphan.yaml"
    missing.write_text("extends: no-such-recipe\n")
    with pytest.raises(ArgenError, match="unknown recipe 'no-such-recipe'"):
        load_config(str(missing))


def test_the_embedded_default_is_the_schemas_defaults():
    assert load_config("default") == Config()


def _stated_leaves(raw: dict, prefix: tuple = ()) -> list[tuple]:
    """Every setting a recipe file writes down, as a path of keys."""
    leaves = []
    for key, value in raw.items():
        if isinstance(value, dict) and value:
            leaves += _stated_leaves(value, (*prefix, key))
        else:
            leaves.append((*prefix, key))
    return leaves


def _at(settings: dict, path: tuple):
    for key in path:
        if not isinstance(settings, dict) or key not in settings:
            return "<not set>"
        settings = settings[key]
    return settings


@pytest.mark.parametrize("recipe", sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")))
def test_a_bundled_recipe_states_only_what_it_changes(recipe):
    raw = yaml.safe_load(recipe_path(recipe).read_text()) or {}
    parent = raw.pop("extends", None)
    before = (load_config(parent) if parent else Config()).model_dump(mode="json")
    after = load_config(recipe).model_dump(mode="json")
    restated = [
        ".".join(path)
        for path in _stated_leaves(raw)
        if _at(before, path) == _at(after, path) != "<not set>"
    ]
    assert not restated, f"{recipe} restates what it inherits: {restated}"


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("train.max_steps=-5", r"train\.max_steps: .*at least 1 \(or -1"),
        ("train.max_steps=0", r"train\.max_steps: .*at least 1"),
        ("train.save_steps=true", r"train\.save_steps: .*not true or false"),
        ("curate.seed=true", r"curate\.seed: .*not true or false"),
        ("judge.max_retries=false", r"judge\.max_retries: .*not true or false"),
        ("judge.timeout_s=.inf", r"judge\.timeout_s: .*finite"),
        ("orchestration.stage_timeout_s=.nan", r"orchestration\.stage_timeout_s: .*finite"),
        ("train.learning_rate=true", r"train\.learning_rate: .*not true or false"),
        ("curate.seed=-1", r"curate\.seed: .*greater than or equal to 0"),
    ],
)
def test_nonsense_values_are_refused(override, problem):
    with pytest.raises(ArgenError, match=problem):
        load_config("default", [override])


def test_flags_still_take_true_and_epochs_take_minus_one():
    config = load_config("default", ["curate.drop_invalid=true", "train.max_steps=-1"])
    assert config.curate.drop_invalid is True and config.train.max_steps == -1


def test_a_huge_value_is_quoted_by_its_start_only():
    laughs = "[&a [x,x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]"
    for level in "cdefgh":
        previous = chr(ord(level) - 1) if level != "c" else "b"
        laughs += f", &{level} [" + ",".join([f"*{previous}"] * 9) + "]"
    laughs += "]"
    with pytest.raises(ArgenError) as caught:
        load_config("default", [f"train.learning_rate={laughs}", "judge.model=" + "m" * 10**6])
    message = str(caught.value)
    assert "train.learning_rate" in message and len(message) < 1000


def test_many_problems_are_counted_not_all_listed():
    overrides = [f"train.lora.target_modules=[{', '.join(['[x]'] * 500)}]"]
    with pytest.raises(ArgenError, match=r"\.\.\. and 490 more problem") as caught:
        load_config("default", overrides)
    assert len(str(caught.value)) < 3000


def test_a_recipe_points_the_audit_at_another_grader_and_thresholds(tmp_path):
    config = load_config(
        "default", [f"audit.grader={tmp_path}", "audit.thresholds={medical_falsehood: 0.7}"]
    )
    assert config.audit.grader == tmp_path and config.audit.thresholds == {"medical_falsehood": 0.7}
    with pytest.raises(ArgenError, match="unknown proposition"):
        load_config("default", ["audit.thresholds={falsehood: 0.7}"])
    with pytest.raises(ArgenError, match="audit.threshold"):
        load_config("default", ["audit.threshold=1.5"])


def test_the_resolved_config_hash_ignores_where_a_run_was_placed(tmp_path):
    here = load_config("default", [f"storage.root={tmp_path}"])
    assert resolved_sha256(here) == resolved_sha256(load_config())
    assert resolved_sha256(load_config("default", ["train.seed=4"])) != resolved_sha256(here)
