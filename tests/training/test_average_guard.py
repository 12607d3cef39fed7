"""Averaging guards its output directory itself: a Python call of ``average_model_dirs`` or
``average_snapshots`` on a directory that holds something is refused with one line naming it and
leaves it untouched; ``overwrite=True`` writes the average there (as ``average --overwrite``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.errors import InputError
from transformer.model_dir import load_model_dir, save_model_dir
from transformer.training.average import average_model_dirs, average_snapshots
from transformer.training.checkpoint import save_snapshot


def contents(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path, with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def tiny_model(tokenizer, *, seed: int) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(ModelConfig.tiny(tokenizer.vocab_size, dropout=0.0, d_model=16, d_ff=32,
                                        num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                                        max_len=32))


def save_run(path: Path, tokenizer, *, seed: int) -> Path:
    save_model_dir(path, tiny_model(tokenizer, seed=seed), config={}, src_tokenizer=tokenizer,
                   tgt_tokenizer=tokenizer)
    return path


def refusal(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as err:
        call(*args, **kwargs)
    return str(err.value)


def test_averaging_refuses_a_directory_holding_something_unless_told_to_overwrite(
        number_tokenizer, tmp_path):
    a, b = (save_run(tmp_path / name, number_tokenizer, seed=seed)
            for name, seed in (("a", 1), ("b", 2)))
    for step in (2, 4):
        save_snapshot(a, tiny_model(number_tokenizer, seed=10 + step), step=step, keep=2)
    held = save_run(tmp_path / "held", number_tokenizer, seed=3)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    before = {d: contents(d) for d in (held, other)}
    for average in (lambda out, **kw: average_model_dirs([a, b], out, **kw),
                    lambda out, **kw: average_snapshots(a, out, last=2, **kw)):
        assert refusal(average, held) == f"{held} already holds a model; pass --overwrite to replace it"
        assert refusal(average, other) == (
            f"{other}: exists and is not an empty directory; pass --overwrite to write the model "
            "into it")
        assert {d: contents(d) for d in (held, other)} == before

    average_model_dirs([a, b], held, overwrite=True)
    mean = load_model_dir(held)
    assert mean.record.averaged_from == (str(a), str(b))
    ma, mb = (load_model_dir(d).model.state_dict() for d in (a, b))
    for name, tensor in mean.model.state_dict().items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, (ma[name] + mb[name]) / 2)

    average_snapshots(a, a, last=2, overwrite=True)  # a run's own snapshots averaged into it
    assert load_model_dir(a).record.averaged_from[-1].endswith("4.safetensors")
