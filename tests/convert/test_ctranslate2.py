"""Our model written through CTranslate2's TransformerSpec decodes as ours does."""

from __future__ import annotations

import json

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.cli import main
from transformer.convert import save_ctranslate2
from transformer.decoding import beam_search, greedy_decode
from transformer.model_dir import save_model_dir

ctranslate2 = pytest.importorskip("ctranslate2")

VOCAB = ["<pad>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(36)]
SHAPES = {
    "post-LN relu": {},
    "pre-LN gelu": dict(norm_first=True, activation="gelu"),
    "shared and tied": dict(share_embeddings=True, tie_embeddings=True),
    "learned positions": dict(positional="learned"),
}


def random_model(seed: int, **options) -> Transformer:
    """A tiny model whose weights are perturbed away from their init, so outputs vary."""
    torch.manual_seed(seed)
    model = Transformer(ModelConfig.tiny(len(VOCAB), dropout=0.0, max_len=40, **options)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return model


def ct2(model: Transformer, directory, **kw):
    save_ctranslate2(model, directory, source_vocabulary=VOCAB, target_vocabulary=VOCAB, **kw)
    return ctranslate2.Translator(str(directory), device="cpu", intra_threads=1)


def pieces(src: torch.Tensor) -> list[list[str]]:
    return [[VOCAB[i] for i in row if i != 0] for row in src.tolist()]


def ids(hypothesis: list[str]) -> list[int]:
    return [VOCAB.index(t) for t in hypothesis]


def sources(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, len(VOCAB), (12, 9), generator=g)
    src[::3, 6:] = 0  # some shorter sentences, right-padded
    return src


@pytest.mark.parametrize("shape", SHAPES)
def test_greedy_output_equals_ours(shape, tmp_path):
    model = random_model(0, **SHAPES[shape])
    translator = ct2(model, tmp_path / "ct2")
    src = sources(1)
    ours = greedy_decode(model, src, bos_id=2, eos_id=3, max_len=25)
    theirs = translator.translate_batch(pieces(src), beam_size=1, max_decoding_length=25)
    assert [ids(r.hypotheses[0]) for r in theirs] == ours


@pytest.mark.parametrize("shape", SHAPES)
def test_token_log_probabilities_equal_ours(shape, tmp_path):
    """Teacher-forced: CTranslate2's log-probability of every target token (EOS included) is
    our model's, on padded batches."""
    model = random_model(2, **SHAPES[shape])
    translator = ct2(model, tmp_path / "ct2")
    src, tgt = sources(3), sources(4)[:, :6]
    results = translator.score_batch(pieces(src), pieces(tgt))
    bos = torch.full((len(tgt), 1), 2)
    with torch.no_grad():
        logp = model(src, torch.cat([bos, tgt], 1)).log_softmax(-1)  # (B, T + 1, V)
    for b, result in enumerate(results):
        target = [i for i in tgt[b].tolist() if i != 0] + [3]
        ours = [float(logp[b, t, i]) for t, i in enumerate(target)]
        assert result.log_probs == pytest.approx(ours, abs=1e-4)


def test_beam_equals_ours_where_the_searches_agree(tmp_path):
    """On a model whose best continuation is clear (weights not perturbed), beam 4 without
    length penalty gives the same best hypothesis in both engines."""
    torch.manual_seed(4)
    model = Transformer(ModelConfig.tiny(len(VOCAB), dropout=0.0, max_len=40,
                                         share_embeddings=True, tie_embeddings=True)).eval()
    translator = ct2(model, tmp_path / "ct2")
    src = sources(5)
    ours = beam_search(model, src, bos_id=2, eos_id=3, max_len=25, beam_size=4,
                       length_penalty=0.0)
    theirs = translator.translate_batch(pieces(src), beam_size=4, num_hypotheses=4,
                                        length_penalty=0.0, max_decoding_length=25)
    assert [ids(r.hypotheses[0]) for r in theirs] == ours


def test_int8_export_stays_close(tmp_path):
    model = random_model(6, share_embeddings=True, tie_embeddings=True)
    full = ct2(model, tmp_path / "fp32")
    int8 = ct2(model, tmp_path / "int8", quantization="int8")
    src = sources(7)
    a = full.score_batch(pieces(src), [["t1", "t2", "t3"]] * len(src))
    b = int8.score_batch(pieces(src), [["t1", "t2", "t3"]] * len(src))
    for x, y in zip(a, b, strict=True):
        assert y.log_probs == pytest.approx(x.log_probs, abs=0.25)
    assert (tmp_path / "int8" / "model.bin").stat().st_size < (tmp_path / "fp32" / "model.bin").stat().st_size


def test_export_verb_writes_a_directory_ctranslate2_loads(tmp_path, tokenizer, capsys):
    torch.manual_seed(0)
    model = Transformer(ModelConfig.tiny(tokenizer.vocab_size, dropout=0.0, max_len=48)).eval()
    save_model_dir(tmp_path / "run", model, config={}, src_tokenizer=tokenizer,
                   tgt_tokenizer=tokenizer)
    out = tmp_path / "ct2"
    assert main(["export", "ctranslate2", "--model", str(tmp_path / "run"), "--out", str(out),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["out"] == str(out)
    translator = ctranslate2.Translator(str(out), device="cpu")
    text = "three hundred twelve"
    src = torch.tensor([tokenizer.encode(text)])
    ours = greedy_decode(model, src, bos_id=2, eos_id=3, max_len=30)[0]
    theirs = translator.translate_batch([[tokenizer.id_to_piece(i) for i in src[0].tolist()]],
                                        beam_size=1, max_decoding_length=30)[0].hypotheses[0]
    assert [tokenizer.piece_to_id(p) for p in theirs] == ours


def test_bad_exports_are_one_line(tmp_path, tokenizer, capsys):
    torch.manual_seed(0)
    model = Transformer(ModelConfig.tiny(tokenizer.vocab_size, dropout=0.0, max_len=48))
    save_model_dir(tmp_path / "run", model, config={}, src_tokenizer=tokenizer,
                   tgt_tokenizer=tokenizer)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    cases = [["--out", str(tmp_path / "full")],
             ["--out", str(tmp_path / "q"), "--quantization", "int3"]]
    for extra in cases:
        assert main(["export", "ctranslate2", "--model", str(tmp_path / "run"), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("transformer: error:") and "\n" not in err
    assert (tmp_path / "full" / "x").read_text() == "keep"
    assert not (tmp_path / "q").exists()
    with pytest.raises(Exception, match="vocabulary has 3 pieces"):
        save_ctranslate2(model, tmp_path / "v", source_vocabulary=["a", "b", "c"],
                         target_vocabulary=["a", "b", "c"])
