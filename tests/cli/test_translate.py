"""``transformer translate``: line order and count, streaming, n-best, bf16, an interactive prompt,
one-line errors with exit status 2, atomic outputs."""

from __future__ import annotations

import io
import json
import random
import sys

import pytest

from transformer.cli import main


def test_translate_keeps_order_and_count(cli, run_dir, tmp_path, capsys):
    lines = cli.numbers(1000, empty_every=13)
    lines[500:505] = [lines[42]] * 5  # duplicates far apart must translate alike
    src = cli.write(tmp_path / "in.txt", lines)
    out = tmp_path / "out.txt"
    rc = main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out), "--beam", "1",
               "--batch-size", "37"])
    assert rc == 0, capsys.readouterr().err
    got = cli.read(out)
    assert len(got) == 1000
    for line, translation in zip(lines, got, strict=True):
        assert (translation == "") == (line.strip() == ""), "empty input <-> empty output"
    assert len(set(got[500:505] + [got[42]])) == 1
    assert sum(len(t) > 0 for t in got) > 900 and len(set(got)) > 100, "outputs should vary"
    # a sample translated alone, one sentence per batch, gives the same lines
    sample = random.Random(1).sample(range(1000), 12)
    alone = cli.write(tmp_path / "alone.txt", [lines[i] for i in sample])
    alone_out = tmp_path / "alone_out.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(alone), "-o", str(alone_out),
                 "--beam", "1", "--batch-size", "1"]) == 0
    assert cli.read(alone_out) == [got[i] for i in sample]


def _needs_engine(low):
    from transformer.decoding.packing import int8_engine

    if low == "int8" and int8_engine() is None:
        return pytest.mark.skip(reason="no quantized engine (x86, fbgemm or qnnpack) for this CPU")
    return []


@pytest.mark.parametrize("low", [pytest.param(p, marks=_needs_engine(p)) for p in ("bf16", "int8")])
@pytest.mark.parametrize("beam", ["1", "3"])
def test_translate_in_bf16_and_int8(cli, run_dir, tmp_path, capsys, monkeypatch, beam, low):
    """``--precision`` reaches the decoder: the lines (and beam scores) are the library's at that
    precision (load_translator + translate_lines), and the beam scores are not float32's. int8
    covers every layer here (this tiny model's are below the machine's int8 crossover)."""
    import dataclasses

    from transformer.decoding import thresholds
    from transformer.inference.lines import translate_lines
    from transformer.inference.loader import load_translator

    every_layer = dataclasses.replace(thresholds.decoding_thresholds(), int8_min_work=0)
    monkeypatch.setattr(thresholds, "decoding_thresholds", lambda: every_layer)

    lines = cli.numbers(40, seed=3, empty_every=7)
    src = cli.write(tmp_path / "in.txt", lines)
    out = tmp_path / f"{low}.jsonl"
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out), "--json",
                 "--beam", beam, "--length-penalty", "0.6", "--batch-size", "16",
                 "--precision", low]) == 0, capsys.readouterr().err
    got = [json.loads(line) for line in cli.read(out)]
    want = {}
    for precision in ("fp32", low):
        translator = load_translator(run_dir, beam_size=int(beam), length_penalty=0.6,
                                     batch_size=16, precision=precision)
        src_lang, tgt_lang = translator.record.languages
        want[precision] = translate_lines(translator, lines, src_lang=src_lang, tgt_lang=tgt_lang)
    assert [g["translation"] for g in got] == [t.text for t in want[low]]
    if beam != "1":  # greedy search gives no scores
        assert [g["score"] for g in got] == pytest.approx([t.score for t in want[low]], abs=1e-5)
        scored = [(g["score"], t.score) for g, t in zip(got, want["fp32"], strict=True) if t.text]
        assert any(abs(a - b) > 1e-4 for a, b in scored), "the same scores as float32"


def test_translate_streams_stdin_in_order(cli, run_dir, tmp_path, capsys, monkeypatch):
    lines = cli.numbers(120, seed=3, empty_every=10)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(lines).encode())))
    assert main(["translate", "--model", str(run_dir), "--beam", "2", "--batch-size", "16"]) == 0
    streamed = capsys.readouterr().out.split("\n")[:-1]
    src = cli.write(tmp_path / "in.txt", lines)
    out = tmp_path / "out.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out),
                 "--beam", "2"]) == 0
    assert streamed == cli.read(out) and len(streamed) == 120


def test_translate_nbest_and_json(cli, run_dir, tmp_path, capsys):
    lines = ["twenty one", "", "three hundred and five"]
    src = cli.write(tmp_path / "in.txt", lines)
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
def test_missing_or_corrupt_model_dir(cli, run_dir, tmp_path, capsys, verb):
    missing = tmp_path / "missing"
    assert main([*verb, "--model", str(missing)]) == 2
    assert str(missing) in cli.one_line_error(capsys)

    broken = cli.make_run(tmp_path / "broken", cli._tok(run_dir))
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    assert main([*verb, "--model", str(broken)]) == 2
    assert "config.json" in cli.one_line_error(capsys)

    truncated = cli.make_run(tmp_path / "truncated", cli._tok(run_dir))
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    assert main([*verb, "--model", str(truncated)]) == 2
    assert "model.safetensors" in cli.one_line_error(capsys)


def test_bad_input_file_leaves_no_output(cli, run_dir, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"one\ntwo \xff three\n")
    out = tmp_path / "out.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(bad), "-o", str(out)]) == 2
    assert "line 2" in cli.one_line_error(capsys)
    assert not out.exists()
    assert main(["translate", "--model", str(run_dir), "--beam", "2", "--nbest", "3"]) == 2
    assert "--nbest" in cli.one_line_error(capsys)


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


def test_translate_takes_sentences_as_arguments(cli, run_dir, tmp_path, capsys, monkeypatch):
    lines = ["twenty one", "three hundred five", ""]
    src = cli.write(tmp_path / "in.txt", lines)
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "--beam", "1"]) == 0
    from_file = capsys.readouterr().out

    class Unreadable:  # standard input must not be read when sentences are given
        def isatty(self) -> bool:
            return False

        @property
        def buffer(self):
            raise AssertionError("stdin was read")

    monkeypatch.setattr(sys, "stdin", Unreadable())
    assert main(["translate", "--model", str(run_dir), *lines, "--beam", "1"]) == 0
    assert capsys.readouterr().out == from_file and from_file.count("\n") == 3
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "five"]) == 2
    assert "-i" in cli.one_line_error(capsys)


def test_translate_warns_of_pieces_the_vocabulary_lacks(cli, run_dir, tmp_path, capsys, caplog):
    lines = ["twenty one", "three € hundred", "five", "seven € and ¤ and €"]
    src = cli.write(tmp_path / "in.txt", lines)
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "--beam", "1",
                 "--json"]) == 0
    items = [json.loads(x) for x in capsys.readouterr().out.split("\n")[:-1]]
    assert [i["unknown_pieces"] for i in items] == [0, 1, 0, 3]
    warned = [r.getMessage() for r in caplog.records if "vocabulary" in r.getMessage()]
    assert len(warned) == 2, warned  # one line per input line that has unknown pieces
    assert "line 2" in warned[0] and "'€'" in warned[0] and str(src) in warned[0]
    assert "line 4" in warned[1] and "'¤'" in warned[1]
    caplog.clear()
    assert main(["translate", "--model", str(run_dir), "--beam", "1", "three € hundred"]) == 0
    assert len([r for r in caplog.records if "vocabulary" in r.getMessage()]) == 1


def test_progress_shows_a_bar_over_the_sentences_and_changes_no_line(cli, run_dir, tmp_path,
                                                                       capsys):
    src = cli.write(tmp_path / "in.txt", cli.numbers(40))
    outs = {}
    for flag in ("--progress", "--no-progress"):
        out = tmp_path / f"out{flag}.txt"
        assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out),
                     "--beam", "1", "--batch-size", "8", "--precision", "fp32", flag]) == 0
        outs[flag] = (cli.read(out), capsys.readouterr().err)
    assert outs["--progress"][0] == outs["--no-progress"][0]
    # the bar (left out of the log once done) counts the 40 sentences
    assert "translating" in outs["--progress"][1] and "/40 [" in outs["--progress"][1]
    assert "translating" not in outs["--no-progress"][1]
