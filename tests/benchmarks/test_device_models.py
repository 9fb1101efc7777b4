import zipfile

import pytest

from benchmarks import device_models


def tiny_wheel(folder, name: str, payload: bytes):
    """A minimal valid wheel of package `name` carrying `payload` (pip can install it)."""
    path = folder / f"{name}-0.1-py3-none-any.whl"
    info = f"{name}-0.1.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{name}/__init__.py", "")
        wheel.writestr(f"{name}/data.bin", payload)
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")
    return path


def test_parts_are_received_installed_once_complete_and_missing_ones_named(tmp_path):
    wheels = [
        tiny_wheel(tmp_path, "alpha_pkg", bytes(range(256)) * 40),
        tiny_wheel(tmp_path, "beta_pkg", b"beta" * 3000),
    ]
    folders = device_models.cut(wheels, tmp_path / "xfer", part_bytes=4096)
    assert len(folders) >= 3, "small parts: the wheels span several uploads"
    store = tmp_path / "store"
    assert device_models.receive(folders[0], store) == []
    manifest = device_models.json.loads((folders[0] / "manifest.json").read_text())
    held, missing = device_models.held_parts(manifest, store)
    assert held == ["part00"] and missing == [f["name"] for f in manifest["parts"][1:]]
    installed = [name for folder in folders[1:] for name in device_models.receive(folder, store)]
    assert sorted(installed) == sorted(w.name for w in wheels)
    assert (store / "site" / "alpha_pkg" / "data.bin").read_bytes() == bytes(range(256)) * 40
    assert device_models.held_parts(manifest, store)[1] == []


def test_a_corrupted_part_is_refused_by_name(tmp_path):
    wheel = tiny_wheel(tmp_path, "gamma_pkg", b"x" * 10000)
    folders = device_models.cut([wheel], tmp_path / "xfer", part_bytes=4096)
    part = folders[1] / "part01"
    part.write_bytes(b"y" + part.read_bytes()[1:])
    with pytest.raises(SystemExit, match="part01 is not in the manifest or its SHA-256 differs"):
        device_models.receive(folders[1], tmp_path / "store")
    assert not (tmp_path / "store" / "part01").exists()
