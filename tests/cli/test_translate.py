"""``transformer translate``, ``evaluate`` and ``average``: line order and count, streaming, n-best,
one-line errors with exit status 2, atomic outputs, scores equal to sacreBLEU's own."""

from __future__ import annotations

import io
import json
import random
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch

from transformer import ModelConfig, Transformer
from transformer.cli import main
from transformer.data.builtin_task import english_number, german_number
from transformer.model_dir import load_model_dir, save_model_dir


@pytest.fixture(scope="module")
def tokenizer():
    from transformer.data.tokenizer import Tokenizer

    texts = [english_number(n) for n in range(1, 300)] + [german_number(n) for n in range(1, 300)]
    return Tokenizer.train(texts, vocab_size=60, byte_fallback=False)


def make_run(path: Path, tokenizer, *, seed: int = 0, **overrides) -> Path:
    """A model directory holding a random tiny Transformer (outputs are arbitrary but depend on
    the input, which is all that order and batching tests need)."""
    torch.manual_seed(seed)
    shape = dict(d_model=32, d_ff=64, num_heads=4, num_encoder_layers=1, num_decoder_layers=2,
                 dropout=0.0, max_len=48)
    model = Transformer(ModelConfig.tiny(tokenizer.vocab_size, **{**shape, **overrides}))
    config = {"training": {"decode_max_len_a": 1.0, "decode_max_len_b": 4, "src_lang": "en",
                           "tgt_lang": "de", "data": "multi30k"}}
    save_model_dir(path, model, config=config, src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tokenizer) -> Path:
    return make_run(tmp_path_factory.mktemp("run") / "model", tokenizer)


def numbers(count: int, *, seed: int = 0, empty_every: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = [english_number(rng.randrange(1, 5000)) for _ in range(count)]
    if empty_every:
        for i in range(0, count, empty_every):
            lines[i] = "" if i % 2 == 0 else "   "
    return lines


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("transformer: error: ")
    return err


def test_translate_keeps_order_and_count(run_dir, tmp_path, capsys):
    lines = numbers(1000, empty_every=13)
    lines[500:505] = [lines[42]] * 5  # duplicates far apart must translate alike
    src = write(tmp_path / "in.txt", lines)
    out = tmp_path / "out.txt"
    rc = main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out), "--beam", "1",
               "--batch-size", "37"])
    assert rc == 0, capsys.readouterr().err
    got = read(out)
    assert len(got) == 1000
    for line, translation in zip(lines, got, strict=True):
        assert (translation == "") == (line.strip() == ""), "empty input <-> empty output"
    assert len(set(got[500:505] + [got[42]])) == 1
    assert sum(len(t) > 0 for t in got) > 900 and len(set(got)) > 100, "outputs should vary"
    # a sample translated alone, one sentence per batch, gives the same lines
    sample = random.Random(1).sample(range(1000), 12)
    alone = write(tmp_path / "alone.txt", [lines[i] for i in sample])
    alone_out = tmp_path / "alone_out.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(alone), "-o", str(alone_out),
                 "--beam", "1", "--batch-size", "1"]) == 0
    assert read(alone_out) == [got[i] for i in sample]


@pytest.mark.parametrize("beam", ["1", "3"])
def test_translate_in_bf16(run_dir, tmp_path, capsys, beam):
    lines = numbers(40, seed=3, empty_every=7)
    src = write(tmp_path / "in.txt", lines)
    outputs = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / f"{precision}.txt"
        assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out),
                     "--beam", beam, "--precision", precision]) == 0, capsys.readouterr().err
        outputs[precision] = read(out)
    assert len(outputs["bf16"]) == 40
    assert all((a == "") == (b == "") for a, b in zip(*outputs.values(), strict=True))
    # rounding the weights to bf16 may flip a near-tie of a random model, but not most outputs
    same = sum(a == b for a, b in zip(*outputs.values(), strict=True))
    assert same >= 20, outputs


def test_translate_streams_stdin_in_order(run_dir, tmp_path, capsys, monkeypatch):
    lines = numbers(120, seed=3, empty_every=10)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(lines).encode())))
    assert main(["translate", "--model", str(run_dir), "--beam", "2", "--batch-size", "16"]) == 0
    streamed = capsys.readouterr().out.split("\n")[:-1]
    src = write(tmp_path / "in.txt", lines)
    out = tmp_path / "out.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out),
                 "--beam", "2"]) == 0
    assert streamed == read(out) and len(streamed) == 120


def test_translate_nbest_and_json(run_dir, tmp_path, capsys):
    lines = ["twenty one", "", "three hundred and five"]
    src = write(tmp_path / "in.txt", lines)
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "--beam", "3"]) == 0
    best = capsys.readouterr().out.split("\n")[:-1]
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "--beam", "3",
                 "--nbest", "2"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.split("\n")[:-1]]
    assert [int(r[0]) for r in rows] == [1, 1, 2, 2, 3, 3]
    assert [rows[0][2], rows[4][2]] == [best[0], best[2]] and rows[2][2] == ""
    assert float(rows[0][1]) >= float(rows[1][1])
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "--beam", "3", "--nbest",
                 "2", "--json"]) == 0
    items = [json.loads(x) for x in capsys.readouterr().out.split("\n")[:-1]]
    assert [i["translation"] for i in items] == best
    assert len(items[0]["nbest"]) == 2 and items[1]["nbest"] == []


@pytest.mark.parametrize("verb", [["translate"], ["evaluate", "--src-file", "x", "--ref-file", "y"]])
def test_missing_or_corrupt_model_dir(run_dir, tmp_path, capsys, verb):
    missing = tmp_path / "missing"
    assert main([*verb, "--model", str(missing)]) == 2
    assert str(missing) in one_line_error(capsys)

    broken = make_run(tmp_path / "broken", _tok(run_dir))
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    assert main([*verb, "--model", str(broken)]) == 2
    assert "config.json" in one_line_error(capsys)

    truncated = make_run(tmp_path / "truncated", _tok(run_dir))
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    assert main([*verb, "--model", str(truncated)]) == 2
    assert "model.safetensors" in one_line_error(capsys)


def _tok(run_dir: Path):
    return load_model_dir(run_dir).src_tokenizer


def test_bad_input_file_leaves_no_output(run_dir, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"one\ntwo \xff three\n")
    out = tmp_path / "out.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(bad), "-o", str(out)]) == 2
    assert "line 2" in one_line_error(capsys)
    assert not out.exists()
    assert main(["translate", "--model", str(run_dir), "--beam", "2", "--nbest", "3"]) == 2
    assert "--nbest" in one_line_error(capsys)


def test_evaluate_reproduces_sacrebleu(run_dir, tmp_path, capsys):
    sources = numbers(60, seed=5)
    src = write(tmp_path / "src.txt", sources)
    hyp_first = tmp_path / "first.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(hyp_first),
                 "--beam", "2"]) == 0
    # references: half the model's own outputs (perfect matches), half German number words
    own = read(hyp_first)
    references = [own[i] if i % 2 else german_number(i + 1) for i in range(60)]
    ref = write(tmp_path / "ref.txt", references)
    hyp = tmp_path / "hyp.txt"
    assert main(["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file",
                 str(ref), "--hyp-out", str(hyp), "--beam", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    hypotheses = read(hyp)
    assert hypotheses == own
    assert report["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert report["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score)
    lc = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True, tokenize="13a").score
    assert report["bleu_lc"] == pytest.approx(lc)
    assert 0 < report["bleu"] < 100 and "tok:13a" in report["bleu_signature"]
    assert main(["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file",
                 str(ref), "--beam", "2"]) == 0
    text = capsys.readouterr().out
    assert "BLEU" in text and "chrF" in text and "version:" in text


def test_evaluate_mismatched_files(run_dir, tmp_path, capsys):
    src = write(tmp_path / "src.txt", numbers(5))
    ref = write(tmp_path / "ref.txt", numbers(4))
    assert main(["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file",
                 str(ref)]) == 2
    assert "5 lines" in one_line_error(capsys)


def test_evaluate_multi30k_split(run_dir, shared_data, capsys, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA", str(shared_data))
    assert main(["evaluate", "--model", str(run_dir), "--data", "multi30k", "--split",
                 "test_2016_flickr", "--beam", "1", "--max-len", "8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == 1000 and report["data"] == "multi30k/test_2016_flickr.en-de"


def test_average(tmp_path, tokenizer, capsys):
    a = make_run(tmp_path / "a", tokenizer, seed=1)
    b = make_run(tmp_path / "b", tokenizer, seed=2)
    out = tmp_path / "avg"
    assert main(["average", "--models", str(a), str(b), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["averaged_from"] == [str(a), str(b)]
    ma, mb, avg = (load_model_dir(p).model.state_dict() for p in (a, b, out))
    for name, tensor in avg.items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, (ma[name] + mb[name]) / 2)
    assert main(["translate", "--model", str(out), "-i", str(write(tmp_path / "x", ["one"]))]) == 0
    capsys.readouterr()

    assert main(["average", "--models", str(a), str(b), "--out", str(out)]) == 2
    assert "--overwrite" in one_line_error(capsys)
    other = make_run(tmp_path / "other", tokenizer, d_ff=48)
    assert main(["average", "--models", str(a), str(other), "--out", str(tmp_path / "o2")]) == 2
    assert "model.d_ff: 64 vs 48" in one_line_error(capsys)
    assert not (tmp_path / "o2").exists()
    assert main(["average", "--models", str(a), "--out", str(tmp_path / "o3")]) == 2
    assert "at least two" in one_line_error(capsys)
    assert main(["average", "--models", str(a), str(tmp_path / "nope"), "--out",
                 str(tmp_path / "o4")]) == 2
    assert "nope" in one_line_error(capsys)


def test_interactive_prompt(run_dir, capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    typed = iter(["twenty one", "", "five"])

    def fake_input(prompt: str = "") -> str:
        try:
            return next(typed)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("builtins.input", fake_input)
    assert main(["translate", "--model", str(run_dir), "--beam", "1"]) == 0
    answers = capsys.readouterr().out.split("\n")[:-1]
    assert len(answers) == 3 and answers[1] == "" and answers[0] and answers[2]
