"""``transformer score``: one score per line, equal to the library's forced-decoding score; --json
one object per line; bad files refused in one line naming the file (exit 2)."""

from __future__ import annotations

import json

import pytest

from transformer.cli import main
from transformer.data.builtin_task import german_number


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("score")
    sources = ["forty-two", "three hundred twelve", "", "seven thousand one", "nine"]
    targets = [german_number(42), german_number(312), "sieben", german_number(7001), ""]
    src, tgt = root / "src.txt", root / "tgt.txt"
    src.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    tgt.write_text("".join(f"{t}\n" for t in targets), encoding="utf-8")
    return src, tgt, sources, targets


def _library(run_dir, sources, targets):
    from transformer.inference.scoring import load_scorer, score_pairs

    return score_pairs(load_scorer(run_dir, precision="fp32"), sources, targets)


def test_score_prints_one_library_score_per_line(run_dir, files, capsys):
    src, tgt, sources, targets = files
    want = _library(run_dir, sources, targets)
    flags = ["score", "--model", str(run_dir), "--src-file", str(src), "--tgt-file", str(tgt),
             "--precision", "fp32", "--threads", "1"]
    assert main(flags) == 0
    out = capsys.readouterr().out.splitlines()
    assert [float(x) for x in out] == pytest.approx([w.log_prob for w in want], abs=1e-6)
    assert main([*flags, "--normalize", "--max-tokens", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [float(x) for x in out] == pytest.approx([w.log_prob_per_token for w in want], abs=1e-6)
    assert main([*flags, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows == [{"line": n, **w.to_dict()} for n, w in enumerate(want, start=1)]
    assert set(rows[0]) == {"line", "log_prob", "log_prob_per_token", "tokens", "source_cut"}


@pytest.mark.parametrize("write, message", [
    (lambda tgt: tgt.write_text("eins\nzwei\n", encoding="utf-8"), "{tgt} has 2 lines but {src} has 5"),
    (lambda tgt: tgt.write_bytes(b""), "{tgt}: file is empty"),
    (lambda tgt: tgt.write_bytes(b"eins\nzw\xffei\n"), "{tgt}, line 2: not valid UTF-8"),
    (lambda tgt: tgt.write_text("eins\n" * 4 + "acht" * 60 + "\n", encoding="utf-8"),
     "{tgt}, line 5: "),
])
def test_bad_files_are_refused_in_one_line_naming_the_file(cli, run_dir, files, tmp_path, capsys,
                                                           write, message):
    src = files[0]
    tgt = tmp_path / "bad.txt"
    write(tgt)
    rc = main(["score", "--model", str(run_dir), "--src-file", str(src), "--tgt-file", str(tgt)])
    assert rc == 2
    assert message.format(src=src, tgt=tgt) in cli.one_line_error(capsys)


def test_a_missing_model_is_refused_after_the_files_are_checked(cli, files, tmp_path, capsys):
    src, tgt, *_ = files
    short = tmp_path / "short.txt"
    short.write_text("eins\n", encoding="utf-8")
    rc = main(["score", "--model", str(tmp_path / "nothing"), "--src-file", str(src),
               "--tgt-file", str(short)])
    assert rc == 2 and "has 1 lines" in cli.one_line_error(capsys)
