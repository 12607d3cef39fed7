"""``translate --format html``: an argument, standard input or -i FILE is one document, answered
as the library answers it (to stdout, or atomically to -o); per-line flags and unreadable
documents are refused in one line with status 2."""

from __future__ import annotations

import gzip
import io
import json
import sys

import pytest

from transformer.cli import main

PAGE = ('<!DOCTYPE html>\n<html lang="en">\n<body>\n<p>three <b>hundred</b> forty-five. '
        '<a href="/x?a=1&amp;b=2" title="seven">two</a></p>\n<pre>keep <i>me</i></pre>\n'
        "<script>if (a < b) {}</script>\n</body>\n</html>\n")
FLAGS = ["--beam", "1", "--precision", "fp32"]


def _library(run_dir, documents):
    from transformer.inference.html import translate_html_batch
    from transformer.inference.loader import load_translator

    translator = load_translator(run_dir, beam_size=1, precision="fp32")
    return translate_html_batch(translator, documents)


def test_each_argument_is_a_snippet(run_dir, capsys):
    snippets = ["seven <b>hundred</b>", "<i>forty</i>-two"]
    want = _library(run_dir, snippets)
    assert main(["translate", "--model", str(run_dir), "--format", "html", *FLAGS, *snippets]) == 0
    assert capsys.readouterr().out == "".join(t.html + "\n" for t in want)


def test_standard_input_is_one_document(run_dir, capsys, monkeypatch):
    (want,) = _library(run_dir, [PAGE])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(PAGE.encode("utf-8"))))
    assert main(["translate", "--model", str(run_dir), "--format", "html", *FLAGS]) == 0
    out = capsys.readouterr().out
    assert out == want.html
    assert "<pre>keep <i>me</i></pre>" in out and out.endswith("</html>\n")


def test_a_file_is_one_document_written_atomically(run_dir, tmp_path, capsys):
    (want,) = _library(run_dir, [PAGE])
    source = tmp_path / "page.html.gz"
    source.write_bytes(gzip.compress(PAGE.encode("utf-8")))
    out = tmp_path / "page.de.html"
    assert main(["translate", "--model", str(run_dir), "--format", "html", *FLAGS,
                 "-i", str(source), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == want.html
    assert main(["translate", "--model", str(run_dir), "--format", "html", *FLAGS,
                 "-i", str(source), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["html"] == want.html and row["elements"] == want.elements == 2
    assert row["sentences"] == want.sentences


@pytest.mark.parametrize("flag", [["--nbest", "2"], ["--alignments"], ["--constraints"],
                                  ["--target-prefix", "drei"]])
def test_per_line_flags_are_refused(cli, run_dir, capsys, flag):
    rc = main(["translate", "--model", str(run_dir), "--format", "html", *flag, "<b>seven</b>"])
    assert rc == 2
    assert "is not available with --format html" in cli.one_line_error(capsys)


def test_an_unreadable_document_is_refused_naming_it(cli, run_dir, tmp_path, capsys):
    bad = tmp_path / "bad.html"
    bad.write_bytes(b"<p>\x00\x01</p>")
    assert main(["translate", "--model", str(run_dir), "--format", "html", "-i", str(bad)]) == 2
    assert f"{bad}: not an HTML document (control character U+0000" in cli.one_line_error(capsys)
    bad.write_bytes(b"<p>\xff</p>")
    assert main(["translate", "--model", str(run_dir), "--format", "html", "-i", str(bad)]) == 2
    assert "not valid UTF-8 (byte 0xff" in cli.one_line_error(capsys)
