"""Our model exported as a MarianMT directory: Hugging Face loads it with the same logits and
decodes as we do; imported back, the logits are ours again."""

from __future__ import annotations

import json

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.cli import main
from transformer.convert import export_huggingface, import_marian
from transformer.decoding import greedy_decode
from transformer.model_dir import load_model_dir, save_model_dir

transformers = pytest.importorskip("transformers")


def make_run(path, tokenizer, **options):
    torch.manual_seed(0)
    config = ModelConfig.tiny(tokenizer.vocab_size, dropout=0.0, max_len=48,
                              share_embeddings=True, **options)
    model = Transformer(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    save_model_dir(path, model, config={}, src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    return model


def batch(tokenizer):
    rows = [tokenizer.encode(s) for s in ("three hundred twelve", "seven", "ninety-nine thousand")]
    width = max(map(len, rows))
    return torch.tensor([r + [0] * (width - len(r)) for r in rows])


@pytest.mark.parametrize("options", [dict(), dict(tie_embeddings=True, activation="silu"),
                                     dict(positional_layout="halves", activation="gelu")])
def test_huggingface_logits_and_greedy_equal_ours(tmp_path, tokenizer, options):
    model = make_run(tmp_path / "run", tokenizer, **options)
    export_huggingface(tmp_path / "run", tmp_path / "hf")
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    src = batch(tokenizer)
    tgt = torch.randint(4, tokenizer.vocab_size, (len(src), 5), generator=torch.Generator().manual_seed(0))
    tgt_in = torch.cat([torch.full((len(src), 1), 2), tgt], 1)
    with torch.no_grad():
        ours = model(src, tgt_in)
        theirs = hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt_in).logits
    assert torch.allclose(ours, theirs, atol=1e-4)
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=(src != 0).long(), num_beams=1,
                          do_sample=False, max_new_tokens=10, forced_eos_token_id=None)
    generated = []
    for row in out.tolist():
        row = [i for i in row[1:] if i != 0]
        generated.append(row[: row.index(3)] if 3 in row else row)
    assert generated == greedy_decode(model, src, bos_id=2, eos_id=3, max_len=10)


def test_marian_tokenizer_loads_the_export(tmp_path, tokenizer):
    make_run(tmp_path / "run", tokenizer)
    export_huggingface(tmp_path / "run", tmp_path / "hf")
    hf_tok = transformers.MarianTokenizer.from_pretrained(tmp_path / "hf")
    text = "three hundred twelve"
    assert hf_tok(text).input_ids == [*tokenizer.encode(text), 3]  # Marian ends a source with </s>


def test_export_and_import_back_gives_our_logits(tmp_path, tokenizer):
    model = make_run(tmp_path / "run", tokenizer, tie_embeddings=True)
    export_huggingface(tmp_path / "run", tmp_path / "hf")
    import_marian(tmp_path / "hf", tmp_path / "back")
    back = load_model_dir(tmp_path / "back")
    src = batch(tokenizer)
    tgt_in = torch.tensor([[2, 5, 6, 7]] * len(src))
    assert back.model.config.tgt_vocab_size == model.config.tgt_vocab_size
    with torch.no_grad():
        assert torch.allclose(back.model(src, tgt_in), model(src, tgt_in), atol=1e-4)


def test_export_verb_and_refusals(tmp_path, tokenizer, capsys):
    make_run(tmp_path / "run", tokenizer)
    assert main(["export", "huggingface", "--model", str(tmp_path / "run"), "--out",
                 str(tmp_path / "hf"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["out"] == str(tmp_path / "hf")
    make_run(tmp_path / "pre", tokenizer, norm_first=True)
    assert main(["export", "huggingface", "--model", str(tmp_path / "pre"), "--out",
                 str(tmp_path / "hf2")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "pre-LN" in err
    assert not (tmp_path / "hf2").exists()
