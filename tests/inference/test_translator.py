"""Translator: input order, empty lines, streaming equals whole-list translation, truncation."""

from __future__ import annotations

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.config.decoding import DecodeOptions
from transformer.decoding import Hypothesis
from transformer.decoding.packing import packing_available
from transformer.inference.translator import Translator, _one_line


class CharTokenizer:
    """Letters a..l are ids 4..15; decode joins them back (enough for the Translator's needs)."""

    vocab_size = 16

    def encode(self, text: str) -> list[int]:
        return [4 + "abcdefghijkl".index(c) for c in text if c in "abcdefghijkl"]

    def decode(self, ids) -> str:
        return "".join("abcdefghijkl"[i - 4] for i in ids if i >= 4)


@pytest.fixture
def translator(copy_model):
    tok = CharTokenizer()
    return Translator(copy_model, tok, tok, bos_id=2, eos_id=3,
                      options=DecodeOptions(beam_size=1, max_len_a=1.0, max_len_b=3), batch_size=4)


def test_order_empty_lines_and_batches(translator):
    lines = ["abc", "", "   ", "kjihgf", "a", "bbbb", "lk", "", "cdefgh", "e"]
    got = [t.text for t in translator.translate(lines)]
    alone = [translator.translate([line])[0].text for line in lines]
    assert got == alone
    assert [g == "" for g in got[1:3]] == [True, True] and got[7] == ""
    assert sum(len(g) > 1 for g in got) >= 3, "the copy model should produce real outputs"


def test_stream_equals_translate(translator):
    lines = ["abc", "", "kjihgf", "a", "bbbb", "lk", "cdefgh"] * 3
    expected = translator.translate(lines)
    for chunk in (1, 3, None):
        got = list(translator.stream(iter(lines), chunk_size=chunk))
        assert [t.text for t in got] == [t.text for t in expected]


def test_beam_scores_and_nbest(copy_model):
    tok = CharTokenizer()
    t = Translator(copy_model, tok, tok, bos_id=2, eos_id=3,
                   options=DecodeOptions(beam_size=3, nbest=2, max_len_a=1.0, max_len_b=3))
    first, empty = t.translate(["cafe", ""])
    assert len(first.nbest) == 2 and first.nbest[0] == (first.text, first.score)
    assert first.score is not None and first.score >= first.nbest[1][1]
    assert empty.text == "" and empty.nbest == [] and empty.score is None


def test_long_sources_are_cut_to_the_model(copy_model):
    tok = CharTokenizer()
    t = Translator(copy_model, tok, tok, bos_id=2, eos_id=3, options=DecodeOptions(beam_size=1))
    (result,) = t.translate(["abcdefghijkl" * 4])  # 48 tokens, the model has 32 positions
    assert t.truncated == 1 and isinstance(result.text, str)


def test_helpers_and_options():
    assert _one_line("a\nb\r\nc") == "a b c" and _one_line("abc") == "abc"
    for bad in (dict(beam_size=0), dict(beam_size=2, nbest=3), dict(length_penalty=-1.0),
                dict(max_len_a=-0.5), dict(max_len=0)):
        with pytest.raises(ValueError):
            DecodeOptions(**bad)
    torch.manual_seed(0)
    model = Transformer(ModelConfig.tiny(16))
    with pytest.raises(ValueError, match="batch size"):
        Translator(model, CharTokenizer(), CharTokenizer(), bos_id=2, eos_id=3, batch_size=0)


@pytest.mark.skipif(not packing_available(), reason="this PyTorch build has no oneDNN")
def test_decoder_weights_are_packed_once_across_calls(translator, copy_model):
    lines = ["abc", "kjihgf", "a", "bbbb", "lk", "cdefgh"]  # two batches of 4
    first = [t.text for t in translator.translate(lines)]
    packer = translator.decoder  # the translator's fast path, kept across calls
    assert packer is not None and packer.packs >= 1
    packs = packer.packs
    translator.translate(lines[:2])
    list(translator.stream(iter(lines), chunk_size=1))
    assert packer.packs == packs
    assert all("forward" not in m.__dict__ for m in copy_model.modules())
    with torch.no_grad():  # a changed weight is packed again, and used
        copy_model.output_projection.bias.add_(0.0)
        copy_model.output_projection.weight.mul_(1.0)
    assert [t.text for t in translator.translate(lines)] == first
    assert packer.packs == packs + 1


@pytest.mark.parametrize("beam_size", [1, 3])
def test_translate_ids_are_the_ids_translate_detokenizes(copy_model, beam_size):
    """Token ids in, best ids out, in input order and without a tokenizer: what validation and
    the demo use; detokenized they are exactly what translate() returns."""
    tok = CharTokenizer()
    options = DecodeOptions(beam_size=beam_size, max_len_a=1.0, max_len_b=3)
    with_tok = Translator(copy_model, tok, tok, bos_id=2, eos_id=3, options=options, batch_size=2)
    ids_only = Translator(copy_model, None, None, bos_id=2, eos_id=3, options=options, batch_size=2)
    lines = ["abc", "kjihgf", "a", "bbbb", "lk"]
    got = ids_only.translate_ids([tok.encode(line) for line in lines])
    assert [tok.decode(ids) for ids in got] == [t.text for t in with_tok.translate(lines)]
    assert got == [ids_only.translate_ids([tok.encode(line)])[0] for line in lines]


def test_an_unknown_output_piece_is_shown_not_dropped(copy_model, monkeypatch):
    from transformer.data.tokenizer import UNK_ID, Tokenizer

    tok = Tokenizer.train(["zwei drei vier", "elf zwölf"] * 20, vocab_size=40, byte_fallback=False)
    translator = Translator(copy_model, tok, tok, bos_id=2, eos_id=3,
                            options=DecodeOptions(beam_size=1))
    ids = [*tok.encode("zw"), UNK_ID, *tok.encode("lf")]
    monkeypatch.setattr(translator, "_decode",
                        lambda sources, *_, **__: [[Hypothesis(ids, 0.0, 0.0, len(ids) + 1)] for _ in sources])
    text = translator.translate(["elf"])[0].text
    assert "⁇" in text and text.replace(" ", "") == "zw⁇lf"  # SentencePiece's " ⁇ "
