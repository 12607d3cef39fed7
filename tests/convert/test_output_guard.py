"""The exporters guard their output directory themselves (as CTranslate2's
``Converter.convert(output_dir, force=)``): a Python call on a directory that holds something is
refused with one line naming it and leaves it untouched; ``overwrite=True`` replaces it whole."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.errors import InputError
from transformer.model_dir import save_model_dir


def contents(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path, with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture
def run(tmp_path, tokenizer) -> Path:
    """A model directory that both exporters take (shared embeddings, post-LN, sinusoids)."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig.tiny(tokenizer.vocab_size, dropout=0.0, max_len=48,
                                         share_embeddings=True)).eval()
    save_model_dir(tmp_path / "run", model, config={}, src_tokenizer=tokenizer,
                   tgt_tokenizer=tokenizer)
    return tmp_path / "run"


def ctranslate2_export(run: Path, out: Path, **kw) -> Path:
    pytest.importorskip("ctranslate2")
    from transformer.convert import export_ctranslate2

    return export_ctranslate2(run, out, **kw)


def ctranslate2_save(run: Path, out: Path, **kw) -> Path:
    pytest.importorskip("ctranslate2")
    from transformer.convert import save_ctranslate2
    from transformer.convert.ctranslate2 import vocabulary
    from transformer.model_dir import load_model_dir

    loaded = load_model_dir(run)
    return save_ctranslate2(loaded.model, out, source_vocabulary=vocabulary(loaded.src_tokenizer),
                            target_vocabulary=vocabulary(loaded.tgt_tokenizer), **kw)


def huggingface_export(run: Path, out: Path, **kw) -> Path:
    pytest.importorskip("transformers")
    from transformer.convert import export_huggingface

    return export_huggingface(run, out, **kw)


@pytest.mark.parametrize("export", [ctranslate2_export, ctranslate2_save, huggingface_export])
def test_an_exporter_refuses_a_directory_holding_something_unless_told_to_overwrite(
        export, run, tmp_path):
    out = tmp_path / "out"
    (out / "old").mkdir(parents=True)
    (out / "old" / "model.bin").write_bytes(b"an earlier export")
    (out / "notes.txt").write_text("mine")
    before = contents(out)
    with pytest.raises(InputError) as err:
        export(run, out)
    assert str(err.value) == f"{out}: exists and is not an empty directory"
    assert contents(out) == before and not out.with_name("out.tmp").exists()

    assert export(run, out, overwrite=True) == out
    fresh = export(run, tmp_path / "fresh")
    assert sorted(contents(out)) == sorted(contents(fresh))  # the export alone: nothing old

    file = tmp_path / "file"
    file.write_text("not a directory")
    with pytest.raises(InputError, match="exists and is not an empty directory"):
        export(run, file, overwrite=True)  # overwrite replaces a directory, never a file
    assert file.read_text() == "not a directory"
