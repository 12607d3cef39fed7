"""The model directory and the checkpoint: round trips, tied weights, atomic writes, clear errors."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors import safe_open

from transformer import ModelConfig, Transformer, atomic
from transformer.atomic import atomic_write_text
from transformer.errors import InputError
from transformer.model_dir import load_model_dir, save_model_dir
from transformer.training import checkpoint as ckpt
from transformer.training.checkpoint import load_checkpoint, save_checkpoint
from transformer.training.rng import rng_state, set_rng_state


def model_for(tok, **overrides):
    shape = dict(d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1)
    cfg = ModelConfig.tiny(tok.vocab_size, **{**shape, **overrides})
    return Transformer(cfg)


def one_line(err: Exception) -> str:
    text = str(err)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("tied", [False, True])
def test_model_dir_round_trip(tmp_path, number_tokenizer, tied):
    tok = number_tokenizer
    extra = dict(share_embeddings=True, tie_embeddings=True) if tied else {}
    model = model_for(tok, **extra).eval()
    save_model_dir(tmp_path, model, config={"training": {"note": "x"}}, src_tokenizer=tok,
                   tgt_tokenizer=tok)
    loaded = load_model_dir(tmp_path)
    stored = loaded.record.to_dict()
    assert stored["format_version"] == 1 and loaded.record.task == "translation"
    assert loaded.record.model == model.config and stored["model"] == model.config.to_dict()
    assert stored["training"] == {"note": "x"}
    assert loaded.src_tokenizer == tok and loaded.tgt_tokenizer == tok
    assert not loaded.model.training
    src = torch.tensor([tok.encode("three hundred five")])
    tgt = torch.tensor([[2, *tok.encode("dreihundert")]])
    torch.testing.assert_close(loaded.model(src, tgt), model(src, tgt), rtol=0, atol=0)
    if tied:  # one tensor on disk for the three names, and still one Parameter after loading
        with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as f:
            stored = set(f.keys())  # noqa: SIM118
        assert len(stored) == len(model.state_dict()) - 2
        m = loaded.model
        assert m.output_projection.weight is m.tgt_embed.token.weight is m.src_embed.token.weight
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name or p.name.endswith(".old")]


def test_corrupt_weights_are_one_clear_error(tmp_path, number_tokenizer):
    tok = number_tokenizer
    save_model_dir(tmp_path, model_for(tok), config={}, src_tokenizer=tok, tgt_tokenizer=tok)
    path = tmp_path / "model.safetensors"
    data = path.read_bytes()
    for broken in (b"not a safetensors file at all", data[: len(data) // 2], b""):
        path.write_bytes(broken)
        with pytest.raises(InputError) as err:
            load_model_dir(tmp_path)
        assert str(path) in one_line(err.value)


def test_weights_of_another_configuration_are_named(tmp_path, number_tokenizer):
    tok = number_tokenizer
    save_model_dir(tmp_path / "a", model_for(tok), config={}, src_tokenizer=tok, tgt_tokenizer=tok)
    save_model_dir(tmp_path / "b", model_for(tok, d_ff=48), config={}, src_tokenizer=tok,
                   tgt_tokenizer=tok)
    os.replace(tmp_path / "b" / "model.safetensors", tmp_path / "a" / "model.safetensors")
    with pytest.raises(InputError, match="does not match") as err:
        load_model_dir(tmp_path / "a")
    assert "shape" in one_line(err.value)


def test_tokenizer_that_does_not_fit_the_vocabulary(tmp_path, number_tokenizer):
    from transformer.data.tokenizer import Tokenizer
    from transformer.data.tokenizer_pair import save_tokenizers

    tok = number_tokenizer
    save_model_dir(tmp_path, model_for(tok), config={}, src_tokenizer=tok, tgt_tokenizer=tok)
    other = Tokenizer.train(["eins zwei drei vier fünf sechs sieben acht neun zehn"] * 5,
                            vocab_size=40, byte_fallback=False)
    save_tokenizers(other, other, tmp_path / "tokenizer")
    with pytest.raises(InputError, match="vocabulary") as err:
        load_model_dir(tmp_path)
    one_line(err.value)


@pytest.mark.parametrize("content", [None, "{not json", '{"format_version": 7}', "[1, 2]",
                                     '{"format_version": 1, "model": {"d_model": 3}}'])
def test_bad_config_json(tmp_path, number_tokenizer, content):
    tok = number_tokenizer
    save_model_dir(tmp_path, model_for(tok), config={}, src_tokenizer=tok, tgt_tokenizer=tok)
    path = tmp_path / "config.json"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    with pytest.raises(InputError) as err:
        load_model_dir(tmp_path)
    assert "config.json" in one_line(err.value)


def test_missing_directory():
    with pytest.raises(InputError, match="no such model directory"):
        load_model_dir("/nonexistent/run")


def weights_of(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_checkpoint_state_loads_with_weights_only(tmp_path, synth):
    model = synth.tiny_model()
    opt = torch.optim.Adam(model.parameters())
    model(torch.tensor([[5, 6]]), torch.tensor([[2, 7]])).sum().backward()
    opt.step()
    save_checkpoint(tmp_path, model=model, state={"optimizer": opt.state_dict(), "step": 3,
                                                  "rng": [rng_state()]})
    raw = torch.load(tmp_path / "checkpoint" / "state.pt", weights_only=True)
    assert raw["step"] == 3 and raw["format_version"] == 1
    fresh = synth.tiny_model(seed=1)
    state = load_checkpoint(tmp_path, model=fresh)
    for k, v in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v)
    opt2 = torch.optim.Adam(fresh.parameters())
    opt2.load_state_dict(state["optimizer"])
    set_rng_state(state["rng"][0])


def test_a_crash_while_writing_the_checkpoint_keeps_the_previous_one(tmp_path, synth, monkeypatch):
    first = synth.tiny_model(seed=1)
    second = synth.tiny_model(seed=2)
    save_checkpoint(tmp_path, model=first, state={"step": 1})

    def crash(*args, **kwargs):
        raise OSError("disk full (simulated)")

    # killed while the tensors are being written
    with monkeypatch.context() as m:
        m.setattr(ckpt, "save_model", crash)
        with pytest.raises(OSError):
            save_checkpoint(tmp_path, model=second, state={"step": 2})
    probe = synth.tiny_model(seed=3)
    assert load_checkpoint(tmp_path, model=probe)["step"] == 1
    assert all(torch.equal(probe.state_dict()[k], v) for k, v in first.state_dict().items())

    # killed between moving the old checkpoint aside and moving the new one in
    calls = []
    real_replace = os.replace

    def replace_then_crash(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("killed (simulated)")
        return real_replace(src, dst)

    with monkeypatch.context() as m:
        m.setattr(atomic.os, "replace", replace_then_crash)
        with pytest.raises(OSError):
            save_checkpoint(tmp_path, model=second, state={"step": 2})
    assert not (tmp_path / "checkpoint").exists() and (tmp_path / "checkpoint.old").is_dir()
    assert load_checkpoint(tmp_path, model=probe)["step"] == 1
    assert all(torch.equal(probe.state_dict()[k], v) for k, v in first.state_dict().items())

    # the next save completes and cleans up
    save_checkpoint(tmp_path, model=second, state={"step": 3})
    assert load_checkpoint(tmp_path, model=probe)["step"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_atomic_write_never_leaves_a_half_written_file(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    atomic_write_text(path, json.dumps({"a": 1}))

    def crash(*args, **kwargs):
        raise OSError("killed (simulated)")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(OSError):
        atomic_write_text(path, json.dumps({"a": 2}))
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_missing_or_corrupt_checkpoint(tmp_path, synth):
    model = synth.tiny_model()
    with pytest.raises(InputError, match="no checkpoint"):
        load_checkpoint(tmp_path, model=model)
    save_checkpoint(tmp_path, model=model, state={"step": 1})
    (tmp_path / "checkpoint" / "state.pt").write_bytes(b"garbage")
    with pytest.raises(InputError, match="state.pt") as err:
        load_checkpoint(tmp_path, model=model)
    one_line(err.value)
