"""``translate --constraints`` and ``--glossary``: every phrase of a line is in its translation,
the output is the library's, lines without phrases translate as without the flags, and bad
input gets one line naming the file and line (exit 2)."""

from __future__ import annotations

import json

import pytest

from transformer.cli import main
from transformer.inference.glossary import glossary_phrases
from transformer.inference.lines import translate_lines
from transformer.inference.loader import load_translator

SOURCES = ["twenty one", "three hundred and five", "nine", "forty four"]
PHRASES = [["hundert"], [], ["neun", "tausend"], []]


def run_lines(args, capsys) -> list[str]:
    assert main(["translate", *args, "--precision", "fp32"]) == 0
    return capsys.readouterr().out.splitlines()


def test_constraints_are_met_and_equal_the_library(cli, run_dir, tmp_path, capsys):
    lines = ["\t".join([s, *p]) for s, p in zip(SOURCES, PHRASES, strict=True)]
    src = cli.write(tmp_path / "in.txt", lines)
    # room enough for this barely trained model to meet every phrase before the limit
    got = [json.loads(line) for line in run_lines(["--model", str(run_dir), "--constraints", "--json",
                                                   "--beam", "3", "--max-len-b", "30", "-i", str(src)],
                                                  capsys)]
    translator = load_translator(run_dir, precision="fp32", beam_size=3, max_len_b=30)
    want = translate_lines(translator, SOURCES, src_lang="en", tgt_lang="de", constraints=PHRASES)
    plain = translate_lines(translator, SOURCES, src_lang="en", tgt_lang="de")
    for item, w, p, phrases in zip(got, want, plain, PHRASES, strict=True):
        assert item["translation"] == w.text
        for phrase in phrases:
            assert phrase in item["translation"]
        if not phrases:
            assert w.text == p.text
    assert any(w.text != p.text for w, p in zip(want, plain, strict=True))


def test_glossary_adds_target_terms_where_source_terms_occur(cli, run_dir, tmp_path, capsys):
    glossary = cli.write(tmp_path / "terms.tsv", ["twenty\tsieben", "", "four\tneun"])
    src = cli.write(tmp_path / "in.txt", SOURCES)
    out = run_lines(["--model", str(run_dir), "--glossary", str(glossary), "--max-len-b", "30",
                     "-i", str(src)], capsys)
    assert "sieben" in out[0] and "neun" in out[3]
    assert glossary_phrases("forty four", [("four", "neun")]) == ["neun"]
    assert glossary_phrases("fourteen", [("four", "neun")]) == []  # whole words only
    assert glossary_phrases("Four", [("four", "neun")]) == []  # case-sensitive


@pytest.mark.parametrize(("glossary_lines", "line", "named"), [
    (["twenty sieben"], None, "terms.tsv:1"),  # no tab
    (["twenty\tsieben", "four\t"], None, "terms.tsv:2"),  # an empty term
    (["twenty\t\u2603\u2603"], None, "terms.tsv:1"),  # nothing the target vocabulary knows
    (None, "nine\t\u2603", "in.txt, line 2"),
    (None, "nine\t\tneun", "in.txt, line 2"),
])
def test_bad_terms_get_one_line_naming_file_and_line(cli, run_dir, tmp_path, capsys, glossary_lines,
                                                     line, named):
    src = cli.write(tmp_path / "in.txt", ["twenty one", line or "nine"])
    args = ["translate", "--model", str(run_dir), "-i", str(src), "--constraints"]
    if glossary_lines is not None:
        args += ["--glossary", str(cli.write(tmp_path / "terms.tsv", glossary_lines))]
    assert main(args) == 2
    assert named in cli.one_line_error(capsys)


def test_constraints_refuse_sampling(cli, run_dir, capsys):
    assert main(["translate", "--model", str(run_dir), "--constraints", "--sampling", "nine"]) == 2
    assert "--sampling" in cli.one_line_error(capsys)


def test_constraints_through_a_resumable_file_job(cli, run_dir, tmp_path, capsys):
    """``-o OUT`` (windows through OUT.partial) writes what standard output shows, phrases met."""
    lines = ["\t".join([s, *p]) for s, p in zip(SOURCES, PHRASES, strict=True)]
    src = cli.write(tmp_path / "in.txt", lines)
    args = ["--model", str(run_dir), "--constraints", "--max-len-b", "30", "--batch-size", "1",
            "-i", str(src)]
    shown = run_lines(args, capsys)
    out = tmp_path / "out.txt"
    assert run_lines([*args, "-o", str(out)], capsys) == []
    assert out.read_text(encoding="utf-8").splitlines() == shown
    for text, phrases in zip(shown, PHRASES, strict=True):
        assert all(phrase in text for phrase in phrases)
