"""A random MarianMT checkpoint, saved as Hugging Face saves OPUS-MT models, imported: the same
logits and the same greedy and beam outputs as ``generate()``."""

from __future__ import annotations

import json

import pytest
import sentencepiece as spm
import torch

from helpers import save_random_marian, spm_model
from transformer.cli import main
from transformer.convert.marian import import_marian
from transformer.data.builtin_task import english_number, german_number
from transformer.decoding import beam_search, greedy_decode
from transformer.model_dir import load_model_dir

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory):
    """A MarianMT directory: config.json, model.safetensors, source.spm, target.spm, vocab.json."""
    directory = tmp_path_factory.mktemp("opus-mt-en-de")
    english = [english_number(n) for n in range(1, 400)]
    german = [german_number(n) for n in range(1, 400)]
    model, vocab = save_random_marian(directory, spm_model(english, 60), spm_model(german, 60))
    return directory, model, vocab


@pytest.fixture(scope="module")
def imported(marian_dir, tmp_path_factory):
    directory, _, _ = marian_dir
    run = tmp_path_factory.mktemp("imported") / "run"
    import_marian(directory, run)
    return load_model_dir(run)


SENTENCES = ["three hundred twelve", "ninety-nine", "one thousand two hundred thirty-four",
             "seven", "forty thousand and eleven"]


def _marian_batch(loaded, vocab):
    """The same sentences as our ids (PAD 0) and as Marian ids (its pad), right-padded."""
    tok = loaded.src_tokenizer
    ours = [tok.encode(s) for s in SENTENCES]
    width = max(map(len, ours))
    ours_t = torch.tensor([ids + [0] * (width - len(ids)) for ids in ours])
    theirs = [[vocab.get(tok.id_to_piece(i), vocab["<unk>"]) if i != 3 else vocab["</s>"]
               for i in ids] for ids in ours]
    pad = vocab["<pad>"]
    theirs_t = torch.tensor([ids + [pad] * (width - len(ids)) for ids in theirs])
    return ours_t, theirs_t, (theirs_t != pad).long()


def _to_marian(ids: list[int], loaded, vocab) -> list[int]:
    return [vocab[loaded.tgt_tokenizer.id_to_piece(i)] for i in ids]


def test_source_ids_end_with_eos_like_marian(imported, marian_dir):
    _, _, vocab = marian_dir
    ours, theirs, _ = _marian_batch(imported, vocab)
    assert ours[0][len(imported.src_tokenizer.encode(SENTENCES[0])) - 1] == 3
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto((marian_dir[0] / "source.spm").read_bytes())
    expected = [vocab.get(p, vocab["<unk>"]) for p in sp.encode(SENTENCES[0], out_type=str)]
    assert theirs[0][: len(expected) + 1].tolist() == [*expected, vocab["</s>"]]


def test_logits_equal_on_padded_batches(imported, marian_dir):
    _, hf, vocab = marian_dir
    src, hf_src, mask = _marian_batch(imported, vocab)
    g = torch.Generator().manual_seed(1)
    tgt = torch.randint(4, imported.model.config.tgt_vocab_size, (len(SENTENCES), 6), generator=g)
    hf_tgt = torch.tensor([_to_marian(row, imported, vocab) for row in tgt.tolist()])
    start = torch.full((len(SENTENCES), 1), vocab["<pad>"])
    with torch.no_grad():
        ours = imported.model(src, torch.cat([torch.full_like(start, 2), tgt], 1))
        theirs = hf(input_ids=hf_src, attention_mask=mask,
                    decoder_input_ids=torch.cat([start, hf_tgt], 1)).logits
    order = [vocab[imported.tgt_tokenizer.id_to_piece(i)] if i != 2 else vocab["<pad>"]
             for i in range(imported.model.config.tgt_vocab_size)]
    keep = [i for i in range(len(order)) if i != 2]
    assert torch.allclose(ours[..., keep], theirs[..., [order[i] for i in keep]], atol=1e-4)
    assert (ours[..., 2] < -1e8).all()  # our BOS row is never predicted


def _generated(out: torch.Tensor, vocab) -> list[list[int]]:
    rows = []
    for row in out.tolist():
        row = row[1:]  # the start token
        row = [i for i in row if i != vocab["<pad>"]]
        rows.append(row[: row.index(vocab["</s>"])] if vocab["</s>"] in row else row)
    return rows


@pytest.mark.parametrize("beam", [1, 4])
def test_decoding_equals_generate(imported, marian_dir, beam):
    _, hf, vocab = marian_dir
    src, hf_src, mask = _marian_batch(imported, vocab)
    steps = 12
    with torch.no_grad():
        out = hf.generate(input_ids=hf_src, attention_mask=mask, num_beams=beam, do_sample=False,
                          max_new_tokens=steps, min_new_tokens=0, length_penalty=0.0,
                          early_stopping=True, bad_words_ids=[[vocab["<pad>"]]],
                          num_return_sequences=1, forced_eos_token_id=None)
    if beam == 1:
        ours = greedy_decode(imported.model, src, bos_id=2, eos_id=3, max_len=steps)
    else:
        ours = beam_search(imported.model, src, bos_id=2, eos_id=3, max_len=steps,
                           beam_size=beam, length_penalty=0.0)
    assert [_to_marian(row, imported, vocab) for row in ours] == _generated(out, vocab)


def test_import_verb_then_translate(marian_dir, tmp_path, capsys):
    directory, _, _ = marian_dir
    run = tmp_path / "run"
    assert main(["import", "marian", str(directory), "--out", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["out"] == str(run)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(run), "-i", str(text), "-o", str(tmp_path / "o.txt"),
                 "--beam", "2"]) == 0
    assert len((tmp_path / "o.txt").read_text(encoding="utf-8").splitlines()) == len(SENTENCES)


@pytest.mark.parametrize("change, message", [
    ({"activation_function": "tanh"}, "activation_function"),
    ({"scale_embedding": False}, "scale_embedding"),
    ({"share_encoder_decoder_embeddings": False}, "separate source and target"),
    ({"decoder_attention_heads": 2}, "heads"),
    ({"d_model": "32"}, "d_model"),
])
def test_unsupported_options_are_one_line(marian_dir, tmp_path, capsys, change, message):
    import shutil

    directory, _, _ = marian_dir
    copy = tmp_path / "m"
    shutil.copytree(directory, copy)
    config = json.loads((copy / "config.json").read_text())
    config.update(change)
    (copy / "config.json").write_text(json.dumps(config))
    assert main(["import", "marian", str(copy), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err and str(copy) in err
    assert not (tmp_path / "run").exists()


def test_missing_files_are_one_line(marian_dir, tmp_path, capsys):
    import shutil

    directory, _, _ = marian_dir
    for name in ("vocab.json", "source.spm", "model.safetensors", "config.json"):
        copy = tmp_path / name
        shutil.copytree(directory, copy)
        (copy / name).unlink()
        assert main(["import", "marian", str(copy), "--out", str(tmp_path / "r" / name)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and str(copy) in err


def test_an_imported_model_exports_to_ctranslate2(imported, marian_dir, tmp_path):
    """The importer's conventions (the source's </s>, the start row) survive a CTranslate2 export:
    CTranslate2 given the pieces alone decodes as we do from our ids."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from transformer.convert import export_ctranslate2

    run = tmp_path / "run"
    import_marian(marian_dir[0], run)
    export_ctranslate2(run, tmp_path / "ct2")
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    tok = imported.src_tokenizer
    pieces = [[tok.id_to_piece(i) for i in tok.encode(s)[:-1]] for s in SENTENCES]  # no </s>
    got = translator.translate_batch(pieces, beam_size=1, max_decoding_length=12)
    src, _, _ = _marian_batch(imported, marian_dir[2])
    ours = greedy_decode(imported.model, src, bos_id=2, eos_id=3, max_len=12)
    assert [[tok.piece_to_id(p) for p in r.hypotheses[0]] for r in got] == ours


def test_fine_tuning_an_imported_model_starts_from_its_logits(marian_dir, tmp_path, monkeypatch):
    """``train --init-from`` a directory made by ``import marian``: at the first update (dropout
    0, so training's forward is evaluation's) our logits on the batch are MarianMTModel's."""
    from transformer.convert.marian import vocabulary_order
    from transformer.training.translation_task import TranslationTask

    directory, hf, vocab = marian_dir
    run = tmp_path / "imported"
    import_marian(directory, run)
    files = {}
    for side, words in (("src", english_number), ("tgt", german_number)):
        files[side] = tmp_path / f"train.{side}"
        files[side].write_text("".join(f"{words(n)}\n" for n in range(1, 200, 7)), encoding="utf-8")
    seen = []
    loss = TranslationTask.loss

    def record(self, model, batch):
        if not seen:
            with torch.no_grad():
                seen.append((batch, model(batch.src, batch.tgt_in)))
        return loss(self, model, batch)

    monkeypatch.setattr(TranslationTask, "loss", record)
    assert main(["train", "--train-src", str(files["src"]), "--train-tgt", str(files["tgt"]),
                 "--init-from", str(run), "--dropout", "0", "--max-steps", "1", "--threads", "1",
                 "--no-progress", "--precision", "fp32", "--out", str(tmp_path / "ft")]) == 0
    batch, ours = seen[0]
    config = hf.config
    _, order = vocabulary_order(vocab, pad_id=config.pad_token_id, eos_id=config.eos_token_id,
                                start_id=config.decoder_start_token_id, path=directory)
    index = torch.tensor(order)  # our id -> Marian's
    with torch.no_grad():
        theirs = hf(input_ids=index[batch.src], attention_mask=(batch.src != 0).long(),
                    decoder_input_ids=index[batch.tgt_in]).logits
    real = batch.tgt_out != 0  # Marian's decoder sees no padding mask: compare real positions
    keep = torch.tensor([i for i in range(len(order)) if i != 2])  # our BOS row is never predicted
    torch.testing.assert_close(ours[real][:, keep], theirs[real][:, index[keep]], atol=1e-4,
                               rtol=1e-4)
    assert json.loads((tmp_path / "ft" / "config.json").read_text())["init_from"]["imported_from"][
        "format"] == "marian"
