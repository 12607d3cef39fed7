"""A multi-target OPUS-MT model (vocabulary pieces ``>>deu<<``, ``>>fra<<``) imported: its tags
are listed (``GET /v1/models`` target_langs), ``translate --target-lang ID`` puts ``>>ID<<`` first
as Hugging Face's MarianTokenizer does (the same greedy output as ``generate()``), and a tag the
model lacks is refused in one line."""

from __future__ import annotations

import io
import json

import pytest
import sentencepiece as spm
import torch

from transformer.cli import main
from transformer.convert.marian import import_marian
from transformer.data.builtin_task import english_number, german_number
from transformer.inference.loader import load_translator
from transformer.inference.tags import tag_ids, target_langs
from transformer.serving.models import load_served

transformers = pytest.importorskip("transformers")
TAGS = [">>deu<<", ">>fra<<"]


def _spm(texts: list[str], size: int) -> bytes:
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=out,
                                   vocab_size=size, model_type="unigram", minloglevel=2)
    return out.getvalue()


def _pieces(proto: bytes) -> list[str]:
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    """A random multi-target MarianMT directory (tags after </s> and <unk>, as OPUS-MT's), imported."""
    directory = tmp_path_factory.mktemp("opus-mt-en-mul")
    source = _spm([english_number(n) for n in range(1, 400)], 60)
    target = _spm([german_number(n) for n in range(1, 400)], 60)
    pieces = ["</s>", "<unk>", *TAGS]
    for p in _pieces(source) + _pieces(target):
        if p not in pieces and p not in ("<s>", "</s>", "<unk>", "<pad>"):
            pieces.append(p)
    pieces.append("<pad>")
    vocab = {p: i for i, p in enumerate(pieces)}
    config = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=32, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        pad_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"],
        decoder_start_token_id=vocab["<pad>"], scale_embedding=True, activation_function="swish",
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" not in name:
                p.add_(torch.randn_like(p) * 0.2)
        model.final_logits_bias.normal_(0, 1.0)
    model.save_pretrained(directory)
    (directory / "source.spm").write_bytes(source)
    (directory / "target.spm").write_bytes(target)
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    run = tmp_path_factory.mktemp("imported") / "run"
    import_marian(directory, run)
    return run, model, vocab, source


def test_tags_are_listed_and_the_server_says_so(multi):
    run, _, _, _ = multi
    translator = load_translator(run, precision="fp32")
    assert target_langs(translator.src_tokenizer) == ["deu", "fra"]
    served = load_served({"mul": str(run)})
    assert served["mul"].describe()["target_langs"] == ["deu", "fra"]


@pytest.mark.parametrize("tag", TAGS)
def test_target_lang_decodes_as_marian_does(multi, tag, capsys):
    run, hf, vocab, source = multi
    sentence = "three hundred twelve"
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(source)
    ids = [vocab[tag], *(vocab.get(p, vocab["<unk>"]) for p in sp.encode(sentence, out_type=str)),
           vocab["</s>"]]
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=40)  # past ours: a random model never stops
    translator = load_translator(run, precision="fp32", beam_size=1)
    ours = {translator.tgt_tokenizer.id_to_piece(i): i for i in range(translator.tgt_tokenizer.vocab_size)}
    inverse = {i: p for p, i in vocab.items()}
    want = translator.tgt_tokenizer.decode(
        [ours[inverse[i]] for i in out[0].tolist()[1:] if i not in (vocab["</s>"], vocab["<pad>"])])
    lang = tag[2:-2]
    assert main(["translate", "--model", str(run), "--precision", "fp32", "--beam", "1",
                 "--max-len-b", "20", "--max-len-a", "0", "--target-lang", lang, sentence]) == 0
    got = capsys.readouterr().out.strip()
    assert got and want.startswith(got)  # the limits count differently; the tokens agree
    assert main(["translate", "--model", str(run), "--precision", "fp32", "--beam", "1",
                 "--max-len-b", "20", "--max-len-a", "0", "--tag", tag, sentence]) == 0
    assert capsys.readouterr().out.strip() == got
    assert main(["translate", "--model", str(run), "--precision", "fp32", "--beam", "1",
                 "--max-len-b", "20", "--max-len-a", "0", sentence]) == 0
    assert capsys.readouterr().out.strip() != got  # the tag changes the translation


def test_an_unknown_tag_is_refused_in_one_line(multi, capsys):
    run, _, _, _ = multi
    assert main(["translate", "--model", str(run), "--target-lang", "xyz", "seven"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer: error: --target-lang xyz:") and "\n" not in err
    assert "deu, fra" in err
    translator = load_translator(run, precision="fp32")
    with pytest.raises(Exception, match="--tag <unk>"):
        tag_ids(translator.src_tokenizer, "<unk>", flag="--tag <unk>")
