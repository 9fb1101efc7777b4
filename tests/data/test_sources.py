"""Reading scenario sources: every unusable or unparsable input is a clean error naming it."""

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from argen.config import CurateConfig
from argen.data import sources
from argen.data.curate import curate_frames, curate_key, validate, write_parquet
from argen.data.sources import read_sources, source_files
from argen.errors import ArgenError
from tests.conftest import REPO, scenario, write_jsonl


def good_rows(prefix="ok"):
    prompts = ["What is a fever?", "How do I treat a sprained ankle?", "Is coffee bad for me?"]
    return [scenario(f"{prefix}-{i}", p) for i, p in enumerate(prompts)]


def folder_with_good_source(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    write_jsonl(folder / "good.jsonl", good_rows())
    return folder


def error_of(paths) -> str:
    with pytest.raises(ArgenError) as err:
        read_sources(paths)
    return str(err.value)


# ------------------------------------------------------------ unusable entries


def test_every_unusable_entry_of_a_folder_is_named_in_one_message(tmp_path):
    folder = folder_with_good_source(tmp_path)
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    (folder / "dangling.jsonl").symlink_to(tmp_path / "gone.jsonl")
    (folder / "sub.jsonl").mkdir()
    os.mkfifo(folder / "pipe.csv")
    message = error_of([folder])
    assert "4 unusable source path(s)" in message
    assert f"{folder / 'loop.jsonl'}: symbolic link loop" in message
    assert f"{folder / 'dangling.jsonl'}: broken symbolic link (to {tmp_path / 'gone.jsonl'})" in (
        message
    )
    assert f"{folder / 'sub.jsonl'}: is a directory" in message
    assert f"{folder / 'pipe.csv'}: not a regular file" in message
    # the cache key (computed before curation) fails the same clean way
    with pytest.raises(ArgenError, match="symbolic link loop"):
        curate_key(CurateConfig(sources=[folder]))


def test_a_top_level_link_loop_or_dangling_link_is_not_called_missing(tmp_path):
    (tmp_path / "a.jsonl").symlink_to(tmp_path / "b.jsonl")
    (tmp_path / "b.jsonl").symlink_to(tmp_path / "a.jsonl")
    (tmp_path / "d.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    message = error_of([tmp_path / "a.jsonl", tmp_path / "d.jsonl", tmp_path / "absent.csv"])
    assert f"{tmp_path / 'a.jsonl'}: symbolic link loop" in message
    assert f"{tmp_path / 'd.jsonl'}: broken symbolic link" in message
    assert f"{tmp_path / 'absent.csv'}: does not exist" in message


def test_a_link_to_a_good_source_is_read(tmp_path):
    folder = folder_with_good_source(tmp_path)
    (folder / "linked.jsonl").symlink_to(write_jsonl(tmp_path / "other.jsonl", good_rows("l")))
    files, rows = read_sources([folder])
    assert [f.name for f in files] == ["good.jsonl", "linked.jsonl"]
    assert len(rows) == 6


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file; see the next test")
def test_an_unreadable_file_is_named(tmp_path):
    folder = folder_with_good_source(tmp_path)
    (folder / "good.jsonl").chmod(0)
    try:
        assert f"{folder / 'good.jsonl'}: cannot read (Permission denied)" in error_of([folder])
    finally:
        (folder / "good.jsonl").chmod(0o644)


def test_an_unreadable_file_is_named_simulated(tmp_path, monkeypatch):
    """As root chmod 000 does not stop reads, so the EACCES the kernel gives anyone else is
    simulated at the open call that checks each source (and again at reading)."""
    folder = folder_with_good_source(tmp_path)
    locked = write_jsonl(folder / "locked.jsonl", good_rows("x"))
    real_open = open

    def guarded_open(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(sources, "open", guarded_open, raising=False)
    assert f"{locked}: cannot read (Permission denied)" in error_of([folder])
    monkeypatch.undo()
    monkeypatch.setattr(
        type(locked),
        "read_bytes",
        lambda self: (_ for _ in ()).throw(OSError(5, "Input/output error", str(self))),
    )
    assert f"{folder / 'good.jsonl'}: cannot read (Input/output error)" in error_of([folder])


def test_other_suffixes_in_a_folder_are_errors_and_case_is_ignored(tmp_path):
    folder = folder_with_good_source(tmp_path)
    write_jsonl(folder / "upper.JSONL", good_rows("u"))
    pd.DataFrame(good_rows("c")).to_csv(folder / "mixed.Csv", index=False)
    files, rows = read_sources([folder])
    assert [f.name for f in files] == ["good.jsonl", "mixed.Csv", "upper.JSONL"]
    assert len(rows) == 9
    (folder / "extra.json").write_text(json.dumps(good_rows("j")))
    (folder / "notes.txt").write_text("hello")
    (folder / "README").write_text("hello")
    message = error_of([folder])
    assert "3 unusable source path(s)" in message
    assert f"{folder / 'extra.json'}: unknown format '.json'" in message
    assert f"{folder / 'notes.txt'}: unknown format '.txt'" in message
    assert f"{folder / 'README'}: unknown format '(no suffix)'" in message


def test_an_empty_folder_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    assert "source folder has no .jsonl, .csv or .parquet files" in error_of([tmp_path / "empty"])


# ------------------------------------------------------------ unparsable files


def test_every_unparsable_file_is_listed_in_one_message(tmp_path):
    folder = folder_with_good_source(tmp_path)
    (folder / "a.jsonl").write_text(json.dumps(scenario("a", "Hi")) + "\n{oops\n[1]\n")
    (folder / "b.jsonl").write_bytes(b'{"id": "b", "prompt": "caf\xe9"}\n')
    (folder / "c.csv").write_text("")
    (folder / "d.parquet").write_text("not parquet")
    (folder / "e.csv").write_text('id,prompt\n"x,"unterminated\n')
    (folder / "f.jsonl").write_text("[" * 100_000 + "\n")
    message = error_of([folder])
    assert "6 unparsable source file(s)" in message
    assert f"{folder / 'a.jsonl'} line 2: not valid JSON" in message
    assert "(and 1 more bad line(s))" in message
    assert f"{folder / 'b.jsonl'} line 1: invalid UTF-8" in message
    assert f"{folder / 'c.csv'}: file is empty" in message
    assert f"{folder / 'd.parquet'}: not a readable parquet file" in message
    assert f"{folder / 'e.csv'} line" in message and "not valid CSV" in message
    assert f"{folder / 'f.jsonl'} line 1: not valid JSON (nested too deeply)" in message
    assert "good.jsonl" not in message


def test_csv_fields_longer_than_the_csv_module_default(tmp_path):
    """The csv module stops at 131,072 characters by default; long fields are read, and a long
    prompt is then rejected by the prompt limit with its line."""
    long = "x" * 200_000
    rows = [scenario("a", "What is a fever?", notes=long), scenario("b", long)]
    pd.DataFrame(rows).to_csv(tmp_path / "s.csv", index=False)
    limit = csv.field_size_limit()
    _, read = read_sources([tmp_path / "s.csv"])
    assert csv.field_size_limit() == limit  # restored
    assert read[0].data["notes"] == long
    with pytest.raises(ArgenError, match=r"s\.csv line 3: prompt has 200000 characters"):
        validate(read, CurateConfig())


# ------------------------------------------------------------ values and encodings


@pytest.mark.parametrize(
    ("prompt_json", "shown"),
    [
        ("NaN", "float nan"),
        ('["What is a fever?"]', "list ['What is a fever?']"),
        ("42", "int 42"),
        ("true", "bool True"),
        ('{"text": "hi"}', "dict {'text': 'hi'}"),
    ],
)
def test_a_prompt_that_is_not_text_is_rejected_with_file_and_line(tmp_path, prompt_json, shown):
    source = write_jsonl(tmp_path / "s.jsonl", good_rows())
    bad = json.dumps(scenario("b", "PROMPT")).replace('"PROMPT"', prompt_json)
    with source.open("a") as handle:
        handle.write(bad + "\n")
    with pytest.raises(ArgenError) as err:
        curate_frames(CurateConfig(sources=[source]))
    assert f"{source} line 4: 'prompt' must be text, got {shown}" in str(err.value)


def test_parquet_values_that_are_not_text_are_rejected(tmp_path):
    frame = pd.DataFrame(good_rows())
    frame["prompt"] = [1, 2, math.nan]
    frame.to_parquet(tmp_path / "s.parquet")
    _, rows = read_sources([tmp_path / "s.parquet"])
    with pytest.raises(ArgenError) as err:
        validate(rows, CurateConfig())
    message = str(err.value)
    assert "row 1: 'prompt' must be text, got float 1.0" in message
    assert "row 3: missing or empty 'prompt'" in message


def test_numeric_ids_are_kept_as_text_but_list_ids_are_not(tmp_path):
    rows = [scenario(7, "What is a fever?"), scenario(["x"], "Is coffee bad for me?")]
    _, read = read_sources([write_jsonl(tmp_path / "s.jsonl", rows)])
    good, rejects = validate(read, CurateConfig(drop_invalid=True))
    assert good["id"].tolist() == ["7"]
    assert rejects["problem"].tolist() == ["'id' must be text, got list ['x']"]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_utf8_byte_order_mark_is_accepted(tmp_path, suffix):
    plain, marked = tmp_path / f"plain{suffix}", tmp_path / f"marked{suffix}"
    if suffix == ".jsonl":
        write_jsonl(plain, good_rows())
    else:
        pd.DataFrame(good_rows()).to_csv(plain, index=False)
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    _, expected = read_sources([plain])
    _, got = read_sources([marked])
    assert [r.data for r in got] == [r.data for r in expected]
    assert [r.where for r in got] == [r.where for r in expected]
    assert len(validate(got, CurateConfig())[0]) == 3


def test_source_files_keeps_paths_as_given_and_sorted(tmp_path):
    folder = folder_with_good_source(tmp_path)
    write_jsonl(folder / "a.jsonl", good_rows("a"))
    assert source_files([folder]) == [folder / "a.jsonl", folder / "good.jsonl"]


def test_an_unpaired_surrogate_escape_is_rejected_and_its_reject_is_writable(tmp_path):
    source = write_jsonl(tmp_path / "s.jsonl", good_rows())
    with source.open("a") as handle:
        handle.write(json.dumps(scenario("bad", "What is \ud800 a fever?")) + "\n")
        handle.write(json.dumps(scenario("bad\udfff", "Is tea bad for me?")) + "\n")
    _, rows = read_sources([source])
    with pytest.raises(ArgenError) as err:
        validate(rows, CurateConfig())
    assert "line 4: 'prompt' is not valid Unicode" in str(err.value)
    assert "line 5: 'id' is not valid Unicode" in str(err.value)
    good, rejects = validate(rows, CurateConfig(drop_invalid=True))
    assert len(good) == 3
    write_parquet(rejects, tmp_path / "rejects.parquet")
    assert "\\ud800" in pd.read_parquet(tmp_path / "rejects.parquet")["row"][0]


def test_a_path_with_a_nul_byte_is_named(tmp_path):
    message = error_of([tmp_path / "bad\x00name.jsonl"])
    assert "bad\x00name.jsonl: not a valid path (embedded null byte)" in message


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ('id,prompt,tier\na,fever?,B\nb,"he"llo,C\n', 3, "not valid CSV"),
        ('id,prompt,tier\na,fever?,B\n\nb,"hello,C\nc,x,A\n', 4, "not valid CSV"),
        ("id,prompt,tier\na,fever?,B,extra,more\n", 2, "5 cells, the header has 3"),
    ],
)
def test_a_bad_csv_row_is_named_by_its_own_line(tmp_path, text, line, problem):
    (tmp_path / "s.csv").write_text(text)
    message = error_of([tmp_path / "s.csv"])
    assert f"{tmp_path / 's.csv'} line {line}: {problem}" in message


# ------------------------------------------------------------ datasets sources


def saved_dataset(folder, rows):
    import datasets

    datasets.Dataset.from_list(rows).save_to_disk(str(folder))
    return folder


def test_a_save_to_disk_folder_is_read_through_the_column_mapping(tmp_path):
    rows = [
        {"qid": "d1", "question": "What is a fever?", "notes": "x"},
        {"qid": "d2", "question": "How do I treat a sprained ankle?", "notes": None},
    ]
    folder = saved_dataset(tmp_path / "mine", rows)
    files, read = read_sources([folder])
    assert files == [folder] and [r.where for r in read] == ["row 1", "row 2"]
    config = CurateConfig(sources=[folder], columns={"prompt": "question", "id": "qid"})
    good, _ = validate(read, config)
    assert good["id"].tolist() == ["d1", "d2"]
    assert good["prompt"].tolist() == ["What is a fever?", "How do I treat a sprained ankle?"]
    assert (good["label_source"] == "proposed").all() and good["source"].tolist() == ["mine"] * 2
    key = curate_key(config)
    saved_dataset(folder, [*rows, {"qid": "d3", "question": "Is tea bad?", "notes": None}])
    assert curate_key(config) != key  # the folder's content is in the cache key


def test_a_labelled_dataset_folder_curates_like_a_file(tmp_path):
    folder = saved_dataset(tmp_path / "labelled", good_rows())
    curated = curate_frames(CurateConfig(sources=[folder], label_examples=[]))
    assert sorted(curated.scenarios["id"]) == ["ok-0", "ok-1", "ok-2"]
    assert (curated.scenarios["label_source"] == "given").all()


def test_a_bad_row_of_a_dataset_is_named_by_its_row(tmp_path):
    rows = [*good_rows(), scenario("b", "Hi", tier="D")]
    folder = saved_dataset(tmp_path / "ds", rows)
    with pytest.raises(ArgenError, match=rf"{folder} row 4: unknown tier 'D'"):
        curate_frames(CurateConfig(sources=[folder]))


def test_a_dataset_dict_folder_asks_for_one_split(tmp_path):
    import datasets

    splits = {"train": good_rows("t"), "test": good_rows("e")}
    whole = datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()})
    whole.save_to_disk(str(tmp_path / "dict"))
    message = error_of([tmp_path / "dict"])
    assert "a datasets DatasetDict folder; name one split's folder" in message
    assert str(tmp_path / "dict" / "train") in message
    _, rows = read_sources([tmp_path / "dict" / "train"])
    assert [r.data["id"] for r in rows] == ["t-0", "t-1", "t-2"]


def test_a_damaged_dataset_folder_is_named(tmp_path):
    folder = saved_dataset(tmp_path / "ds", good_rows())
    for arrow in folder.glob("*.arrow"):
        arrow.write_bytes(b"not arrow")
    assert f"{folder}: not a readable datasets folder" in error_of([folder])


def test_a_hub_source_names_its_split(tmp_path):
    assert "hub:org/name: a hub source is hub:ID@SPLIT" in error_of([Path("hub:org/name")])


def test_an_unreachable_hub_is_a_clear_error(tmp_path):
    """No hub is reachable from here: `argen curate` on a hub id fails naming the source and
    what to do, and writes nothing (offline mode makes the failure immediate)."""
    done = subprocess.run(
        [sys.executable, "-m", "argen.cli", "curate", "--source", "hub:argen-test/none@train"]
        + ["--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2, done.stderr
    assert "hub:argen-test/none@train: cannot load split 'train' of the hub dataset" in done.stderr
    assert "save_to_disk" in done.stderr
    assert not (tmp_path / "out").exists()
