"""A multi-target OPUS-MT model (vocabulary pieces ``>>deu<<``, ``>>fra<<``) imported: its tags
are listed (``GET /v1/models`` target_langs), ``translate --target-lang ID`` puts ``>>ID<<`` first
as Hugging Face's MarianTokenizer does (the same greedy output as ``generate()``), and a tag the
model lacks is refused in one line."""

from __future__ import annotations

import pytest
import sentencepiece as spm
import torch

from helpers import save_random_marian, spm_model
from transformer.cli import main
from transformer.convert.marian import import_marian
from transformer.data.builtin_task import english_number, german_number
from transformer.inference.loader import load_translator
from transformer.inference.tags import tag_ids, target_langs
from transformer.serving.models import load_served

transformers = pytest.importorskip("transformers")
TAGS = [">>deu<<", ">>fra<<"]


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    """A random multi-target MarianMT directory (tags after </s> and <unk>, as OPUS-MT's), imported."""
    directory = tmp_path_factory.mktemp("opus-mt-en-mul")
    source = spm_model([english_number(n) for n in range(1, 400)], 60)
    target = spm_model([german_number(n) for n in range(1, 400)], 60)
    model, vocab = save_random_marian(directory, source, target, tags=tuple(TAGS))
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
