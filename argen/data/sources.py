"""Scenario sources: find the source files, read them into rows, and say clearly what is wrong.

A source is a `.jsonl`, `.csv` or `.parquet` file (suffix in any case), or a folder of them (not
searched recursively), or a `datasets` dataset: a folder written by `Dataset.save_to_disk` (one
split of a `DatasetDict`'s folder, e.g. `saved/train`), or `hub:ID@SPLIT` where the hub is
reachable. Anything else inside a source folder is an error, never skipped: a file with another
suffix, a subfolder, a broken symbolic link, a link loop, an unreadable file. Every unusable
entry is named in one message, and so is every unparsable file. `datasets` is imported only for
a dataset source (it costs a second, and bad input should fail before that).
"""

import codecs
import csv
import errno
import io
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from argen.errors import ArgenError
from argen.hashing import dir_sha256, file_sha256, json_sha256

SOURCE_SUFFIXES = (".jsonl", ".csv", ".parquet")
MAX_LISTED_PROBLEMS = 20
DATASET_FILES = ("state.json", "dataset_info.json")
"""What `Dataset.save_to_disk` writes beside its arrow files: such a folder is one source."""
DATASET_DICT = "dataset_dict.json"
"""What `DatasetDict.save_to_disk` writes beside one folder per split."""
HUB = "hub:"
"""Prefix of a hub dataset source: `hub:ID@SPLIT`."""


@dataclass
class SourceRow:
    """One raw row and where it came from (file and 1-based line or row), for error messages."""

    file: Path
    where: str
    data: dict


def listing(lines: list[str], limit: int | None = MAX_LISTED_PROBLEMS) -> str:
    """Indented problem lines for an error message, cut after `limit` with a count of the rest."""
    shown = lines if limit is None else lines[:limit]
    more = len(lines) - len(shown)
    return "\n".join(f"  {line}" for line in shown) + (f"\n  ... and {more} more" if more else "")


# ---------------------------------------------------------------- finding the files


def _stat_problem(path: Path) -> tuple[os.stat_result | None, str | None]:
    """`path`'s stat (following links), or why it cannot be used: missing, broken link, loop."""
    try:
        return path.stat(), None
    except ValueError as exc:  # an embedded NUL byte
        return None, f"not a valid path ({exc})"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, "symbolic link loop"
        if path.is_symlink():
            return None, f"broken symbolic link (to {os.readlink(path)})"
        if exc.errno == errno.ENOENT:
            return None, "does not exist"
        return None, f"cannot read ({exc.strerror or exc})"


def _file_problem(path: Path, info: os.stat_result) -> str | None:
    """Why a path that exists is not a readable source file (None when it is one)."""
    if stat.S_ISDIR(info.st_mode):
        return "is a directory (source folders are not searched recursively)"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if path.suffix.lower() not in SOURCE_SUFFIXES:
        return (
            f"unknown format {path.suffix or '(no suffix)'!r}; "
            f"expected one of {', '.join(SOURCE_SUFFIXES)}"
        )
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    return None


def hub_source(path: Path) -> tuple[str, str] | None:
    """(dataset id, split) of a `hub:ID@SPLIT` source; None for a path."""
    text = str(path)
    if not text.startswith(HUB):
        return None
    name, _, split = text.removeprefix(HUB).rpartition("@")
    return name, split


def _dataset_folder_problem(folder: Path) -> str | None:
    """Why a `datasets` folder cannot be a source (None for one split's folder): a
    `DatasetDict` folder holds several splits, and the source names one of them."""
    if (folder / DATASET_DICT).is_file():
        splits = sorted(p.name for p in folder.iterdir() if (p / DATASET_FILES[0]).is_file())
        named = ", ".join(str(folder / s) for s in splits) or "none found"
        return f"a datasets DatasetDict folder; name one split's folder ({named})"
    return None


def _is_dataset_folder(folder: Path) -> bool:
    return (
        all((folder / name).is_file() for name in DATASET_FILES)
        or (folder / DATASET_DICT).is_file()
    )


def _folder_files(folder: Path) -> tuple[list[Path], list[str]]:
    """A source folder's files (sorted) and a problem line for every entry that is not one."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        return [], [f"{folder}: cannot list the folder ({exc.strerror or exc})"]
    files, problems = [], []
    for entry in entries:
        info, problem = _stat_problem(entry)
        if info is not None:  # else `problem` says why there is none
            problem = _file_problem(entry, info)
        if problem:
            problems.append(f"{entry}: {problem}")
        else:
            files.append(entry)
    if not files and not problems:
        problems.append(f"{folder}: source folder has no .jsonl, .csv or .parquet files")
    return files, problems


def source_files(paths: list[Path]) -> list[Path]:
    """Expand folders into their source files (sorted); one error names every unusable entry."""
    files: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if hub := hub_source(path):
            if not all(hub):
                problems.append(f"{path}: a hub source is hub:ID@SPLIT, e.g. hub:org/name@train")
            else:
                files.append(path)
            continue
        info, problem = _stat_problem(path)
        if info is not None and stat.S_ISDIR(info.st_mode) and _is_dataset_folder(path):
            if problem := _dataset_folder_problem(path):
                problems.append(f"{path}: {problem}")
            else:
                files.append(path)
            continue
        if info is not None and stat.S_ISDIR(info.st_mode):
            found, folder_problems = _folder_files(path)
            files.extend(found)
            problems.extend(folder_problems)
            continue
        if info is not None:  # else `problem` says why there is none
            problem = _file_problem(path, info)
        if problem:
            problems.append(f"{path}: {problem}")
        else:
            files.append(path)
    if problems:
        raise ArgenError(
            f"{len(problems)} unusable source path(s); a source is a .jsonl, .csv or .parquet "
            f"file, a folder holding only such files, a datasets save_to_disk folder or "
            f"hub:ID@SPLIT:\n{listing(problems, None)}"
        )
    return files


def source_hashes(files: list[Path]) -> dict[str, str]:
    """sha256 of each source, keyed by its path as given (for manifests and cache keys): a
    file's bytes, a dataset folder's files, a hub dataset's downloaded arrow files."""
    try:
        return {str(path): _source_sha256(path) for path in files}
    except OSError as exc:
        raise ArgenError(f"{exc.filename}: cannot read ({exc.strerror or exc})") from None


def _source_sha256(path: Path) -> str:
    if hub := hub_source(path):
        dataset = load_hub_dataset(path, *hub)
        return json_sha256([file_sha256(Path(f["filename"])) for f in dataset.cache_files])
    return dir_sha256(path) if path.is_dir() else file_sha256(path)


# ---------------------------------------------------------------- reading


def read_sources(paths: list[Path]) -> tuple[list[Path], list[SourceRow]]:
    """The source files and all their rows; one error names every file that cannot be parsed."""
    files = source_files(paths)
    rows: list[SourceRow] = []
    problems: list[str] = []
    for path in files:
        found, problem = parse_source(path)
        rows.extend(found)
        if problem:
            problems.append(problem)
    if problems:
        raise ArgenError(
            f"{len(problems)} unparsable source file(s):\n{listing(problems, limit=None)}"
        )
    return files, rows


def parse_source(path: Path) -> tuple[list[SourceRow], str | None]:
    """One file's rows, or a problem line naming the file (and its first bad line)."""
    if hub := hub_source(path):
        return _dataset_rows(path, load_hub_dataset(path, *hub))
    try:
        if path.is_dir():
            return _read_dataset_folder(path)
        if path.stat().st_size == 0:
            return [], f"{path}: file is empty"
        if path.suffix.lower() == ".parquet":
            rows, problem = _read_parquet(path)
        else:
            rows, problem = _read_text(path)
    except OSError as exc:
        return [], f"{path}: cannot read ({exc.strerror or exc})"
    if problem:
        return [], problem
    if not rows:
        return [], f"{path}: file has no rows"
    return rows, None


def _read_text(path: Path) -> tuple[list[SourceRow], str | None]:
    """A jsonl or csv file: UTF-8 (a leading byte-order mark is allowed)."""
    raw = path.read_bytes()
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return [], f"{path} line {line}: invalid UTF-8 ({exc.reason})"
    if path.suffix.lower() == ".jsonl":
        return _read_jsonl(path, text)
    return _read_csv(path, text)


def _read_jsonl(path: Path, text: str) -> tuple[list[SourceRow], str | None]:
    """One JSON object per line (blank lines skipped); reports the first bad line and a count."""
    rows, bad = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append(f"line {number}: not valid JSON ({exc.msg})")
            continue
        except (ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            bad.append(f"line {number}: not valid JSON ({reason})")
            continue
        if not isinstance(data, dict):
            bad.append(f"line {number}: expected a JSON object")
            continue
        rows.append(SourceRow(path, f"line {number}", data))
    if bad:
        more = f" (and {len(bad) - 1} more bad line(s))" if len(bad) > 1 else ""
        return [], f"{path} {bad[0]}{more}"
    return rows, None


def _read_csv(path: Path, text: str) -> tuple[list[SourceRow], str | None]:
    """A CSV with a header row, quoted strictly (a stray quote is an error, not a field that
    swallows the rows after it); fields of any length (the prompt limit is checked later). A
    row with more cells than the header has columns is an error, never cut silently. A problem
    names the line where its record starts."""
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    lines = text.splitlines()
    rows, bad = [], []
    old_limit = csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    try:
        width = len(reader.fieldnames or ())
        while True:
            start = reader.reader.line_num + 1  # DictReader's own count lags on an error
            while start <= len(lines) and not lines[start - 1].strip():
                start += 1  # blank lines are skipped, not records
            try:
                data = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                return [], f"{path} line {start}: not valid CSV ({exc})"
            extra = data.pop(None, None)  # cells beyond the header's columns
            if extra:
                bad.append(f"line {start}: {width + len(extra)} cells, the header has {width}")
                continue
            rows.append(SourceRow(path, f"line {reader.line_num}", data))
    except csv.Error as exc:  # in the header itself
        return [], f"{path} line 1: not valid CSV ({exc})"
    finally:
        csv.field_size_limit(old_limit)
    if bad:
        more = f" (and {len(bad) - 1} more bad line(s))" if len(bad) > 1 else ""
        return [], f"{path} {bad[0]}{more}"
    return rows, None


def _read_parquet(path: Path) -> tuple[list[SourceRow], str | None]:
    """A parquet table; missing values become None."""
    try:
        frame = pq.read_table(path).to_pandas()
    except (pa.ArrowException, OSError, ValueError, TypeError, KeyError) as exc:
        return [], f"{path}: not a readable parquet file ({exc})"
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [SourceRow(path, f"row {i}", data) for i, data in enumerate(records, start=1)], None


# ---------------------------------------------------------------- datasets


def _read_dataset_folder(path: Path) -> tuple[list[SourceRow], str | None]:
    """A `save_to_disk` folder of one split."""
    import datasets

    try:
        dataset = datasets.load_from_disk(str(path))
    except Exception as exc:  # datasets raises many types for a damaged folder
        return [], f"{path}: not a readable datasets folder ({type(exc).__name__}: {exc})"
    return _dataset_rows(path, dataset)


def load_hub_dataset(path: Path, name: str, split: str):
    """A hub dataset's split (downloaded once into the datasets cache); an unreachable hub or
    an unknown dataset or split is an `ArgenError` naming the source."""
    import datasets

    try:
        return datasets.load_dataset(name, split=split)
    except Exception as exc:  # offline, unknown id or split, no permission: all the user's
        raise ArgenError(
            f"{path}: cannot load split {split!r} of the hub dataset {name!r} "
            f"({type(exc).__name__}: {exc}); where the hub cannot be reached, save the dataset "
            "with save_to_disk on a machine that reaches it and name that folder instead"
        ) from None


def _dataset_rows(path: Path, dataset) -> tuple[list[SourceRow], str | None]:
    """A dataset's rows as source rows (`row N`, 1-based), or a problem naming the source."""
    if not hasattr(dataset, "to_list"):
        return [], f"{path}: holds several splits; name one"
    rows = [SourceRow(path, f"row {i}", data) for i, data in enumerate(dataset.to_list(), 1)]
    return (rows, None) if rows else ([], f"{path}: dataset has no rows")
