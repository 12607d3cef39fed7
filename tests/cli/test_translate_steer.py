"""``translate`` steered from the command line: sampling that repeats for a seed, target prefixes
(one for every line, or a file of one per line), the repetition guards, the log-probabilities in
``--json``, and one line naming the flag for every bad combination."""

from __future__ import annotations

import io
import json
import sys

import pytest

from transformer.cli import main
from transformer.inference.lines import translate_lines
from transformer.inference.loader import load_translator

LINES = ["twenty one", "three hundred and five", "", "seven thousand", "forty four", "nine"]


def run_json(args, capsys) -> list[dict]:
    assert main(["translate", *args, "--json", "--precision", "fp32"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def library(run_dir, lines, **options):
    translator = load_translator(run_dir, precision="fp32", **options)
    return translate_lines(translator, lines, src_lang="en", tgt_lang="de")


def test_sampling_repeats_for_a_seed_and_equals_the_library(cli, run_dir, tmp_path, capsys, monkeypatch):
    src = cli.write(tmp_path / "in.txt", LINES)
    flags = ["--model", str(run_dir), "--sampling", "--seed", "5", "--temperature", "1.5",
             "--sampling-topk", "20", "--nbest", "2"]
    first = run_json([*flags, "-i", str(src)], capsys)
    assert run_json([*flags, "-i", str(src)], capsys) == first
    alone = run_json([*flags, "-i", str(src), "--batch-size", "1"], capsys)  # other batch shapes:
    assert [i["nbest"][0]["translation"] if i["nbest"] else "" for i in alone] == \
        [i["nbest"][0]["translation"] if i["nbest"] else "" for i in first]  # equal up to rounding
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(LINES).encode() + b"\n")))
    assert run_json(flags, capsys) == first
    other = run_json([*flags[:4], "6", *flags[5:], "-i", str(src)], capsys)
    assert [i["nbest"] for i in other] != [i["nbest"] for i in first]
    want = library(run_dir, LINES, sampling=True, seed=5, temperature=1.5, sampling_topk=20, nbest=2)
    assert [[n["translation"] for n in i["nbest"]] for i in first] == [[t for t, _ in w.nbest] for w in want]
    for item in first:
        if item["translation"]:
            assert item["score"] == item["log_prob"] == item["nbest"][0]["log_prob"]
            assert item["log_prob_per_token"] == pytest.approx(item["nbest"][0]["log_prob_per_token"])


@pytest.mark.parametrize("beam", ["1", "3"])
def test_json_carries_the_log_probability(cli, run_dir, capsys, beam):
    items = run_json(["--model", str(run_dir), "--beam", beam, *LINES], capsys)
    want = library(run_dir, LINES, beam_size=int(beam))
    for item, t in zip(items, want, strict=True):
        assert item["log_prob"] == pytest.approx(t.log_prob) if t.log_prob is not None else item["log_prob"] is None
        if item["translation"] or item["log_prob"] is not None:
            assert item["log_prob_per_token"] == pytest.approx(t.log_prob / t.tokens)
        assert item["score"] is None if beam == "1" else item["score"] == pytest.approx(t.score)
    assert items[2]["log_prob"] is None and items[2]["log_prob_per_token"] is None


def test_target_prefix_for_every_line_and_from_a_file(cli, run_dir, tmp_path, capsys):
    tok = cli._tok(run_dir)
    got = run_json(["--model", str(run_dir), "--beam", "1", "--target-prefix", "drei hundert", *LINES], capsys)
    start = tok.decode(tok.encode("drei hundert"))
    assert all(i["translation"].startswith(start) for i in got if i["line"] != 3)
    assert [i["translation"] for i in got] == [t.text for t in library(
        run_dir, LINES, beam_size=1, target_prefix="drei hundert")]
    prefixes = cli.write(tmp_path / "prefixes.txt", ["zwei", "", "", "sieben tausend", "vier", ""])
    src = cli.write(tmp_path / "in.txt", LINES)
    got = run_json(["--model", str(run_dir), "--beam", "2", "-i", str(src), "--target-prefix-file",
                    str(prefixes)], capsys)
    plain = run_json(["--model", str(run_dir), "--beam", "2", "-i", str(src)], capsys)
    for item, prefix, alone in zip(got, cli.read(prefixes), plain, strict=True):
        if prefix:
            assert item["translation"].startswith(tok.decode(tok.encode(prefix)))
        elif item["translation"]:
            assert item["translation"] == alone["translation"]


def test_guards_equal_the_library(cli, run_dir, capsys):
    flags = ["--no-repeat-ngram", "2", "--repetition-penalty", "1.3"]
    for beam in ("1", "3"):
        got = run_json(["--model", str(run_dir), "--beam", beam, *flags, *LINES], capsys)
        want = library(run_dir, LINES, beam_size=int(beam), no_repeat_ngram=2, repetition_penalty=1.3)
        assert [i["translation"] for i in got] == [t.text for t in want]


@pytest.mark.parametrize("flags, named", [
    (["--seed", "3"], "--seed"),
    (["--temperature", "0.5"], "--temperature"),
    (["--sampling-topk", "5"], "--sampling-topk"),
    (["--sampling", "--beam", "3"], "--beam"),
    (["--sampling", "--sampling-topp", "1.5"], "--sampling-topp"),
    (["--sampling", "--temperature", "0"], "--temperature"),
    (["--no-repeat-ngram", "-1"], "--no-repeat-ngram"),
    (["--repetition-penalty", "0"], "--repetition-penalty"),
    (["--beam", "2", "--nbest", "3"], "--nbest"),
])
def test_bad_combinations_name_the_flag(cli, run_dir, capsys, flags, named):
    assert main(["translate", "--model", str(run_dir), *flags, "one"]) == 2
    assert named in cli.one_line_error(capsys)
    if "--nbest" not in flags:  # evaluate has the same decoding flags, and refuses alike
        assert main(["evaluate", "--model", str(run_dir), *flags, "--src-file", "x", "--ref-file", "y"]) == 2
        assert named in cli.one_line_error(capsys)


def test_bad_prefix_files(cli, run_dir, tmp_path, capsys):
    src = cli.write(tmp_path / "in.txt", LINES)
    short = cli.write(tmp_path / "short.txt", ["zwei", "drei"])
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "--target-prefix-file", str(short)]) == 2
    line = cli.one_line_error(capsys)
    assert str(short) in line and "2 lines" in line and "6" in line
    with pytest.raises(SystemExit) as stopped:  # argparse's own refusal
        main(["translate", "--model", str(run_dir), "--target-prefix", "a", "--target-prefix-file",
              str(short), "one"])
    assert stopped.value.code == 2 and "--target-prefix" in capsys.readouterr().err
    assert main(["translate", "--model", str(run_dir), "--target-prefix-file", str(tmp_path / "none"), "one"]) == 2
    assert "none" in cli.one_line_error(capsys)


def test_evaluate_samples(cli, run_dir, tmp_path, capsys):
    src = cli.write(tmp_path / "src.txt", ["twenty one", "nine"])
    ref = cli.write(tmp_path / "ref.txt", ["einundzwanzig", "neun"])
    args = ["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file", str(ref),
            "--sampling", "--seed", "1", "--json", "--precision", "fp32"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["beam"] == 1
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] == first["bleu"]


def test_min_length_and_forbid_from_the_command_line(cli, run_dir, tmp_path, capsys):
    """--min-length N and --forbid FILE (one phrase a line, blank lines skipped) translate as the
    library's options do and change the output; a missing or empty file, and N beyond the
    model's positions, are one line naming the flag."""
    flags = ["--model", str(run_dir), "--beam", "2"]
    plain = [i["translation"] for i in run_json([*flags, *LINES], capsys)]
    words = sorted({w for line in plain for w in line.split()})[:2]
    assert words, "the test needs output words to forbid"
    phrases = cli.write(tmp_path / "forbid.txt", [words[0], "", *words[1:]])
    got = [i["translation"] for i in run_json([*flags, "--forbid", str(phrases), *LINES], capsys)]
    assert got != plain
    want = library(run_dir, LINES, beam_size=2, forbid=tuple(words))
    assert got == [t.text for t in want]
    longer = [i["translation"] for i in run_json([*flags, "--min-length", "12", *LINES], capsys)]
    assert longer == [t.text for t in library(run_dir, LINES, beam_size=2, min_length=12)] != plain
    for bad, named in ((["--forbid", str(tmp_path / "none.txt")], "none.txt"),
                       (["--forbid", str(cli.write(tmp_path / "blank.txt", ["", " "]))], "--forbid"),
                       (["--min-length", "500"], "--min-length: 500 is above the"),
                       (["--min-length", "-1"], "--min-length: must be a non-negative integer")):
        assert main(["translate", *flags, *bad, "one"]) == 2
        assert named in cli.one_line_error(capsys)
