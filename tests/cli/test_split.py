"""``translate`` and ``evaluate`` split a line into sentences (``--no-split``: the whole line), keep
line order, count and empty lines, and cut (count, warn) rather than truncate a too-long sentence."""

from __future__ import annotations

import json
import logging

import pytest

from transformer.cli import main
from transformer.inference.loader import load_translator

SENTENCES = ["Twenty one.", "Three hundred and five!", "Seven?"]
# one sentence of about 100 tokens: the tiny run has 48 positions
LONG = ", ".join(["one hundred and twenty three"] * 8)


@pytest.fixture(scope="module")
def run_dir(cli, tokenizer, tmp_path_factory):
    """The folder's random model, of a seed that says something for every sentence here (0's
    says nothing for "Nine.")."""
    return cli.make_run(tmp_path_factory.mktemp("run") / "model", tokenizer, seed=1)


def translate(cli, run_dir, tmp_path, lines, *flags):
    src = cli.write(tmp_path / "in.txt", lines)
    out = tmp_path / "out.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(out),
                 "--beam", "2", *flags]) == 0
    return cli.read(out)


def test_translate_splits_lines_into_sentences(cli, run_dir, tmp_path):
    lines = [" ".join(SENTENCES), "", "forty two", "   ", "Nine. Eleven."]
    got = translate(cli, run_dir, tmp_path, lines)
    alone = translate(cli, run_dir, tmp_path, [*SENTENCES, "forty two", "Nine.", "Eleven."])
    assert all(alone), "the tiny model should say something for every sentence"
    assert got == [" ".join(alone[:3]), "", alone[3], "", " ".join(alone[4:])]


def test_no_split_feeds_the_whole_line(cli, run_dir, tmp_path):
    lines = [" ".join(SENTENCES), "", "Nine. Eleven."]
    got = translate(cli, run_dir, tmp_path, lines, "--no-split")
    translator = load_translator(run_dir, beam_size=2, precision="fp32")
    assert got == [t.text for t in translator.translate(lines)]
    assert got != translate(cli, run_dir, tmp_path, lines)


def test_a_too_long_sentence_is_cut_counted_and_warned(cli, run_dir, tmp_path, capsys, caplog):
    src = cli.write(tmp_path / "in.txt", ["forty two", LONG, "", f"Nine. {LONG}"])
    with caplog.at_level(logging.WARNING):
        assert main(["translate", "--model", str(run_dir), "-i", str(src), "--beam", "1",
                     "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["cut_sentences"] for r in rows] == [0, 1, 0, 1]
    assert [r["sentences"] for r in rows] == [1, 1, 0, 2] and rows[1]["translation"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"
                and "not in the model's vocabulary" not in r.getMessage()]  # LONG's commas
    assert len(warnings) == 2 and warnings[0].startswith("line 2:") and "line 4:" in warnings[1]
    assert not any("were cut" in w and "longer than" in w and "source sentences" in w for w in warnings)


def test_evaluate_splits_and_counts(cli, run_dir, tmp_path, capsys):
    src = cli.write(tmp_path / "src.txt", [" ".join(SENTENCES), LONG, ""])
    ref = cli.write(tmp_path / "ref.txt", ["einundzwanzig. dreihundertfünf! sieben?", "x", ""])
    hyp = {}
    for flags in ([], ["--no-split"]):
        out = tmp_path / f"hyp{len(flags)}.txt"
        assert main(["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file",
                     str(ref), "--beam", "1", "--json", "--hyp-out", str(out), *flags]) == 0
        result = cli.json_out(capsys)
        assert result["cut_sentences"] == 1 and result["split_sentences"] == (not flags)
        hyp[bool(flags)] = cli.read(out)
    alone = translate(cli, run_dir, tmp_path, SENTENCES, "--beam", "1")
    assert hyp[False][0] == " ".join(alone) and hyp[True][0] != hyp[False][0]
    assert hyp[False][2] == hyp[True][2] == ""
