"""The `argen` command line: config, errors and exit codes (stages have their own tests)."""

import yaml

from argen import cli
from flows.cli import main as argen_main


def test_config_prints_the_resolved_recipe(capsys):
    assert cli.main(["config", "--set", "curate.seed=5"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["curate"]["seed"] == 5
    assert printed["model"]["base"] == "smollm2-135m-instruct"


def test_bad_override_is_a_clear_error_with_exit_code_2(capsys):
    assert argen_main(["config", "--set", "curate.sede=5"]) == 2
    assert "curate.sede: unknown key" in capsys.readouterr().err


def test_missing_sources_are_named(tmp_path, capsys):
    code = argen_main(["curate", "--set", f"curate.sources=[{tmp_path / 'nope'}]"])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err


def test_run_driver_and_extra_commands_can_be_plugged_in(capsys):
    calls = []
    assert cli.main(["run"], run=lambda config, recipe: calls.append(recipe) or "done") == 0
    assert calls == ["default"]
    extra = {"hello": lambda config, recipe: f"hello {recipe}"}
    assert cli.main(["hello", "--recipe", "gpu"], extra=extra) == 0
    assert capsys.readouterr().out.strip().endswith("hello gpu")
