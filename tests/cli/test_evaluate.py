"""``transformer evaluate``: scores equal to sacreBLEU's own, on files or a corpus split."""

from __future__ import annotations

import json

import pytest
import sacrebleu

from transformer.cli import main
from transformer.data.builtin_task import german_number


def test_evaluate_reproduces_sacrebleu(cli, run_dir, tmp_path, capsys):
    sources = cli.numbers(60, seed=5)
    src = cli.write(tmp_path / "src.txt", sources)
    hyp_first = tmp_path / "first.txt"
    assert main(["translate", "--model", str(run_dir), "-i", str(src), "-o", str(hyp_first),
                 "--beam", "2"]) == 0
    # references: half the model's own outputs (perfect matches), half German number words
    own = cli.read(hyp_first)
    references = [own[i] if i % 2 else german_number(i + 1) for i in range(60)]
    ref = cli.write(tmp_path / "ref.txt", references)
    hyp = tmp_path / "hyp.txt"
    assert main(["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file",
                 str(ref), "--hyp-out", str(hyp), "--beam", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    hypotheses = cli.read(hyp)
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


def test_evaluate_mismatched_files(cli, run_dir, tmp_path, capsys):
    src = cli.write(tmp_path / "src.txt", cli.numbers(5))
    ref = cli.write(tmp_path / "ref.txt", cli.numbers(4))
    assert main(["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file",
                 str(ref)]) == 2
    assert "5 lines" in cli.one_line_error(capsys)


def test_evaluate_multi30k_split(run_dir, shared_data, capsys, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA", str(shared_data))
    assert main(["evaluate", "--model", str(run_dir), "--data", "multi30k", "--split",
                 "test_2016_flickr", "--beam", "1", "--max-len", "8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == 1000 and report["data"] == "multi30k/test_2016_flickr.en-de"


def test_evaluate_counts_lines_with_unknown_pieces(cli, run_dir, tmp_path, capsys, caplog):
    src = cli.write(tmp_path / "src.txt", ["twenty one", "three € hundred", "five ¤"])
    ref = cli.write(tmp_path / "ref.txt", ["einundzwanzig", "dreihundert", "fünf"])
    assert main(["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file",
                 str(ref), "--beam", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unknown_lines"] == 2
    warned = [r.getMessage() for r in caplog.records if "vocabulary" in r.getMessage()]
    assert len(warned) == 2 and "line 2" in warned[0] and "line 3" in warned[1]


def test_evaluate_metrics_adds_ter_equal_to_sacrebleus(cli, run_dir, tmp_path, capsys):
    src = cli.write(tmp_path / "src.txt", cli.numbers(20, seed=2))
    references = [german_number(i + 1) for i in range(20)]
    ref = cli.write(tmp_path / "ref.txt", references)
    hyp = tmp_path / "hyp.txt"
    base = ["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file", str(ref),
            "--beam", "1"]
    assert main([*base, "--metrics", "bleu,chrf,ter", "--hyp-out", str(hyp), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    hypotheses = cli.read(hyp)
    assert report["ter"] == pytest.approx(sacrebleu.corpus_ter(hypotheses, [references]).score)
    assert report["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert "tok:tercom" in report["ter_signature"]
    assert main([*base, "--json"]) == 0  # the default is today's: BLEU and chrF
    default = json.loads(capsys.readouterr().out)
    assert "ter" not in default and default["chrf"] == report["chrf"]
    assert main([*base, "--metrics", "ter"]) == 0
    text = capsys.readouterr().out
    assert "TER" in text and "BLEU" not in text and "chrF" not in text


def test_evaluate_refuses_an_unknown_metric_in_one_line(cli, run_dir, tmp_path, capsys):
    src = cli.write(tmp_path / "src.txt", cli.numbers(2))
    assert main(["evaluate", "--model", str(run_dir), "--src-file", str(src), "--ref-file",
                 str(src), "--metrics", "bleu,terr"]) == 2
    line = cli.one_line_error(capsys)
    assert "--metrics" in line and "'terr'" in line and "did you mean 'ter'" in line
