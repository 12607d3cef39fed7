"""What the README and the results page claim, held to the code: the flags each verb takes and
their defaults, the shape of ``--json``, the headline figures against the benchmark's own results
file, the PyTorch build ``make setup`` installs, and the pages' lengths."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import pytest

from transformer.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "explanation" / "results.md"


def _verbs() -> dict[str, argparse.ArgumentParser]:
    """Every leaf verb's parser by its command ("classify train")."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
        if not subs and name:
            found[name] = parser
        for action in subs:
            for verb, sub in action.choices.items():
                walk(sub, f"{name} {verb}".strip())

    walk(build_parser(), "")
    return found


VERBS = _verbs()


def _with(flag: str) -> dict[str, argparse.Action]:
    return {verb: p._option_string_actions[flag] for verb, p in VERBS.items()  # noqa: SLF001
            if flag in p._option_string_actions}  # noqa: SLF001


def _words(path: Path) -> int:
    """Words as `wc -w` counts them (the issue that set the limits counted so)."""
    return len(path.read_text(encoding="utf-8").split())


def test_the_readme_is_at_most_1500_words():
    assert _words(README) <= 1500, f"README.md: {_words(README)} words"


def test_the_readmes_first_commands_set_up_and_run_the_demo_and_the_tests():
    """The README's first block of commands: ``make demo`` and ``make test`` (what .ci/run calls)."""
    text = README.read_text(encoding="utf-8")
    first = text.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first.splitlines()]
    assert commands[:2] == ["make demo", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert text.index("make test") < 1500  # near the top


def test_the_results_page_is_at_most_2000_words():
    assert _words(RESULTS) <= 2000, f"results.md: {_words(RESULTS)} words"


# README, "What it does": "The verbs that run a model take `--device` (`auto`, the default ...),
# and all of them but `attention` and `memory` take `--threads`; `memory` estimates for `cpu` or
# `cuda`, in fp32 unless told otherwise. ... `--precision auto`, the default of `train`, `classify
# train`, `translate`, `evaluate` and `serve` ..."

def test_device_is_auto_by_default_everywhere_but_memory():
    device = _with("--device")
    assert {v for v, a in device.items() if a.default != "auto"} == {"memory"}
    assert set(device["memory"].choices) == {"cpu", "cuda"}


def test_every_verb_with_a_device_takes_threads_but_attention_and_memory():
    assert set(_with("--device")) - set(_with("--threads")) == {"attention", "memory"}


def test_precision_defaults_to_auto_where_the_readme_says_and_fp32_in_memory():
    precision = _with("--precision")
    auto = {"train", "classify train", "translate", "evaluate", "serve", "score"}
    assert set(precision) == auto | {"memory"}
    for verb in auto:  # a training verb's None is the preset's, and every preset says auto
        assert precision[verb].default in ("auto", None) and "auto" in precision[verb].choices
        assert precision[verb].default == "auto" or "auto (default)" in precision[verb].help
    assert precision["memory"].default == "fp32"


def test_both_training_verbs_resume():
    assert "--resume" in VERBS["train"]._option_string_actions  # noqa: SLF001
    assert "--resume" in VERBS["classify train"]._option_string_actions  # noqa: SLF001


def test_json_is_one_object_except_translate_and_score_one_per_line():
    shapes = {verb: a.help for verb, a in _with("--json").items()}
    per_line = {"translate", "score"}
    assert {v for v, h in shapes.items() if "per input line" in h or "per line" in h} == per_line
    assert all(h == "print one JSON object" for v, h in shapes.items() if v not in per_line)


def test_version_json_is_one_object(capsys):
    assert main(["version", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and isinstance(json.loads(lines[0]), dict)


def test_translate_json_is_one_object_per_input_line(tmp_path, capsys):
    import torch

    from transformer import ModelConfig, Transformer
    from transformer.data.tokenizer import Tokenizer
    from transformer.model_dir import save_model_dir

    texts = ["one two three", "four five six", "seven eight nine ten"] * 20
    tokenizer = Tokenizer.train(texts, vocab_size=40, byte_fallback=False)
    torch.manual_seed(0)
    model = Transformer(ModelConfig.tiny(tokenizer.vocab_size, d_model=16, d_ff=32, num_heads=2,
                                         num_encoder_layers=1, num_decoder_layers=1, max_len=16))
    save_model_dir(tmp_path / "run", model, config={"training": {"src_lang": "en", "tgt_lang": "de"}},
                   src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    source = tmp_path / "in.txt"
    source.write_text("one two\nthree\n\nfour five\n", encoding="utf-8")
    assert main(["translate", "--model", str(tmp_path / "run"), "-i", str(source), "--json",
                 "--max-len", "6", "--threads", "1", "--precision", "fp32"]) == 0
    items = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [item["line"] for item in items] == [1, 2, 3, 4]


# The headline figures: the same command and decoding setting wherever they are quoted, and the
# figure the benchmark's results file holds.

QUALITY = json.loads((ROOT / "benchmarks" / "results" / "quality.json").read_text(encoding="utf-8"))
HEADLINES = {row["direction"]: row["test"]["chosen"] for row in QUALITY["rows"]}


@pytest.mark.parametrize("direction", ["en-de", "de-en"])
def test_the_headline_bleu_is_the_results_file_with_its_decoding(direction):
    chosen = HEADLINES[direction]
    bleu = f"{chosen['bleu']:.1f} BLEU"
    beam, penalty = chosen["beam"], chosen["length_penalty"]
    setting = f"(beam {beam}, length penalty {penalty:.1f})"
    command = (f"transformer evaluate --model runs/quality/{direction} --data multi30k --split "
               f"test_2016_flickr --beam {beam} --length-penalty {penalty:.1f}")
    readme, results = README.read_text(encoding="utf-8"), RESULTS.read_text(encoding="utf-8")
    assert f"**{bleu}** on test_2016_flickr {setting}" in readme or f"**{bleu}** {setting}" in readme
    assert f"**{bleu}** {setting}" in results and command in results


def test_every_page_quoting_the_headline_gives_its_decoding():
    """40.0 BLEU is beam 5 with length penalty 1.0 wherever it is quoted (it was once quoted with
    three settings), on the user pages; the contributors' record quotes each run with its own."""
    chosen = HEADLINES["en-de"]
    figure = f"{chosen['bleu']:.1f} BLEU"
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    quoted = 0
    for page in pages:
        if "contributing" in page.parts:
            continue
        for paragraph in re.split(r"\n\s*\n|\n\|", page.read_text(encoding="utf-8")):
            paragraph = " ".join(paragraph.replace("**", "").split())
            if figure in paragraph:
                quoted += 1
                beams = set(re.findall(r"beam[ =](\d+)", paragraph))
                penalties = set(re.findall(r"length[ -]penalty[ =](\d+(?:\.\d+)?)", paragraph))
                assert beams == {str(chosen["beam"])}, (page.name, paragraph)
                assert penalties == {f"{chosen['length_penalty']:.1f}"}, (page.name, paragraph)
    assert quoted >= 3


def _make_dry_run(*variables: str) -> str:
    done = subprocess.run(["make", "-n", "-B", "setup", *variables], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    (line,) = [x for x in done.stdout.splitlines() if "torch==" in x]
    return line


def test_make_setup_installs_torch_from_pips_index_unless_told_another():
    """README, Set up: pip's index by default; TORCH_INDEX_URL=... for the CPU-only build."""
    assert "--index-url" not in _make_dry_run()
    cpu = "https://download.pytorch.org/whl/cpu"
    assert f"--index-url {cpu} torch==" in _make_dry_run(f"TORCH_INDEX_URL={cpu}")
    assert f"make setup TORCH_INDEX_URL={cpu}" in README.read_text(encoding="utf-8")
