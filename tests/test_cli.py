"""The `argen` command line: config, errors and exit codes (stages have their own tests)."""

import errno

import pytest
import yaml

from argen import cli
from argen.errors import JudgeOutage
from flows.cli import main as argen_main
from tests.conftest import scenario, write_jsonl


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

    def driver(config, recipe, overrides):
        calls.append((recipe, overrides, config.train.seed))
        return "done"

    assert cli.main(["run"], run=driver) == 0
    assert cli.main(["run", "--set", "train.seed=1"], run=driver) == 0
    assert calls == [("default", [], 0), ("default", ["train.seed=1"], 1)]
    extra = {"hello": lambda config, recipe: f"hello {recipe}"}
    assert cli.main(["hello", "--recipe", "gpu"], extra=extra) == 0
    assert capsys.readouterr().out.strip().endswith("hello gpu")


def test_a_judge_outage_is_not_a_users_error_and_exits_3(capsys):
    def judge_down(config, recipe):
        raise JudgeOutage("judging x failed for 40.0% of 10 items")

    assert cli.main(["outage"], extra={"outage": judge_down}) == 3
    assert "judge outage (try again later): judging x failed" in capsys.readouterr().err


def curate_args(tmp_path, out, *extra):
    """`argen curate` on three good rows into `out`."""
    prompts = ["What is a fever?", "How do I treat a sprained ankle?", "Is coffee bad for me?"]
    rows = [scenario(f"ok-{i}", p) for i, p in enumerate(prompts)]
    source = write_jsonl(tmp_path / "s.jsonl", rows)
    return ["curate", "--set", f"curate.sources=[{source}]", "--out", str(out), *extra]


def test_out_refuses_a_non_empty_folder_and_keeps_its_files(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    assert argen_main(curate_args(tmp_path, out)) == 2
    assert "is not empty; pass --overwrite" in capsys.readouterr().err
    assert argen_main(curate_args(tmp_path, out, "--overwrite")) == 2
    assert "not an argen curate output" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "s.jsonl"]


def test_out_writes_a_new_or_empty_folder_and_overwrites_only_when_told(tmp_path, capsys):
    out = tmp_path / "empty"
    out.mkdir()
    assert argen_main(curate_args(tmp_path, out)) == 0
    first = (out / "manifest.json").read_text()
    assert argen_main(curate_args(tmp_path, out)) == 2  # an earlier output: not without asking
    assert (out / "manifest.json").read_text() == first
    assert argen_main(curate_args(tmp_path, out, "--overwrite")) == 0
    assert (out / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "s.jsonl"]


@pytest.mark.parametrize("out", [".", "..", "here"])
def test_out_as_the_current_directory_is_a_clean_error(tmp_path, monkeypatch, capsys, out):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert argen_main(curate_args(tmp_path, "../here" if out == "here" else out)) == 2
    assert "is the current directory or contains it" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here", "s.jsonl"]
    assert not list(here.iterdir())


def test_argen_run_hands_its_overrides_to_the_pipeline_flow(monkeypatch):
    import flows.cli
    import flows.pipeline

    seen = {}

    def flow(recipe, overrides, return_state):
        seen.update(recipe=recipe, overrides=overrides)
        raise SystemExit(0)  # stop before the report: only the hand-over is under test

    monkeypatch.setattr(flows.pipeline, "pipeline", flow)
    with pytest.raises(SystemExit):
        flows.cli.run_with_prefect(None, "default", ["train.seed=1"])
    assert seen == {"recipe": "default", "overrides": ["train.seed=1"]}


@pytest.mark.parametrize("target", ["real", "nowhere"])
def test_out_naming_a_symbolic_link_is_refused_before_any_work(tmp_path, capsys, target):
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / target)
    sources = tmp_path / "s.jsonl"
    write_jsonl(sources, [scenario("a", "What is a fever?")])
    code = cli.main(["curate", "--out", str(link), "--set", f"curate.sources=[{sources}]"])
    assert code == 2
    assert f"--out {link} is a symbolic link" in capsys.readouterr().err
    assert link.is_symlink() and not list((tmp_path / "real").iterdir())


def test_a_full_disk_is_a_users_error_with_exit_code_2(capsys):
    def disk_full(config, recipe):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/out/train.parquet")

    assert cli.main(["fill"], extra={"fill": disk_full}) == 2
    err = capsys.readouterr().err
    assert err.startswith("argen: error: no space left on the device") and "Traceback" not in err
