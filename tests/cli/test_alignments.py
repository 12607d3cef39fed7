"""``translate --alignments``: the library's pairs, after the translation as Marian prints them
or in --json; refused with --nbest unless --json."""

from __future__ import annotations

import json
from dataclasses import replace

from transformer.cli import main


def test_translate_alignments_are_the_librarys(run_dir, capsys):
    from transformer.inference.lines import translate_lines
    from transformer.inference.loader import load_translator

    lines = ["three hundred forty-five. seven", "forty-two thousand one"]
    translator = load_translator(run_dir, beam_size=1, precision="fp32", alignments=True)
    want = translate_lines(translator, lines)
    assert all(w.alignments for w in want), "the tiny model should produce words to align"
    flags = ["translate", "--model", str(run_dir), "--beam", "1", "--precision", "fp32",
             "--alignments", *lines]
    assert main(flags) == 0
    out = capsys.readouterr().out.splitlines()
    pharaoh = [" ".join(f"{i}-{j}" for i, j in w.alignments) for w in want]
    assert out == [f"{w.text} ||| {p}" for w, p in zip(want, pharaoh, strict=True)]
    assert main([*flags, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["alignments"] for r in rows] == [[list(p) for p in w.alignments] for w in want]
    assert main(flags[:-3] + ["--json", *lines]) == 0  # without the flag: no field
    assert all("alignments" not in json.loads(line) for line in capsys.readouterr().out.splitlines())


def test_alignments_with_nbest_need_json(cli, run_dir, capsys):
    rc = main(["translate", "--model", str(run_dir), "--nbest", "2", "--alignments", "seven"])
    assert rc == 2 and "--alignments with --nbest needs --json" in cli.one_line_error(capsys)


def test_align_lines_aligns_the_flagged_lines_only_and_decodes_the_same(run_dir):
    from transformer.inference.lines import translate_lines
    from transformer.inference.loader import load_translator

    lines = ["three hundred forty-five. seven", "forty-two thousand one", "nine"]
    translator = load_translator(run_dir, beam_size=1, precision="fp32")
    every = translate_lines(translator, lines, options=replace(translator.options, alignments=True))
    some = translate_lines(translator, lines, align_lines=[True, False, True])
    assert [t.text for t in some] == [t.text for t in every]
    assert [t.alignments for t in some] == [every[0].alignments, None, every[2].alignments]
    assert every[0].alignments
