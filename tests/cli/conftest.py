"""What the command-line tests share: tiny model directories, number-word files, a trained run,
and small helpers (the ``cli`` fixture)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import save_translator
from transformer.cli import main
from transformer.data.builtin_task import english_number
from transformer.model_dir import load_model_dir


def make_run(path: Path, tokenizer, *, seed: int = 0, **overrides) -> Path:
    """A model directory holding a random tiny Transformer (outputs are arbitrary but depend on
    the input, which is all that order and batching tests need)."""
    config = {"training": {"decode_max_len_a": 1.0, "decode_max_len_b": 4, "src_lang": "en",
                           "tgt_lang": "de", "data": "multi30k"}}
    return save_translator(path, tokenizer, seed=seed, config=config, **overrides)


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


def data_flags(files):
    return ["--train-src", files["train_src"], "--train-tgt", files["train_tgt"],
            "--valid-src", files["valid_src"], "--valid-tgt", files["valid_tgt"]]


def json_out(capsys):
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    return json.loads(out[0])


def error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("transformer: error:")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err)
    return errors[0]


def copy_run(trained_run, tmp_path):
    target = tmp_path / "run"
    shutil.copytree(trained_run, target)
    return target


TINY = ["--preset", "tiny", "--d-model", "16", "--d-ff", "32", "--num-heads", "2", "--layers", "1",
        "--vocab-size", "60", "--no-byte-fallback", "--max-tokens", "256", "--bleu-sample", "8",
        "--threads", "1", "--no-progress",
        # pinned: auto's probe may choose differently from one process to the next, and these
        # tests compare runs bit for bit (tests/test_precision.py tests auto)
        "--precision", "fp32"]


def _tok(run_dir: Path):
    return load_model_dir(run_dir).src_tokenizer


@pytest.fixture(scope="session")
def cli() -> SimpleNamespace:
    """The helpers above, for the test modules (which cannot import this conftest)."""
    return SimpleNamespace(make_run=make_run, numbers=numbers, write=write, read=read, one_line_error=one_line_error, data_flags=data_flags, json_out=json_out, error_line=error_line, copy_run=copy_run, TINY=TINY, _tok=_tok)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tokenizer) -> Path:
    return make_run(tmp_path_factory.mktemp("run") / "model", tokenizer)


@pytest.fixture(scope="session")
def number_files(tmp_path_factory):
    """Tiny parallel files of English and German number words (train 120 pairs, valid 10)."""
    from transformer.data.builtin_task import number_task_splits

    splits = number_task_splits(0, train_size=120, valid_size=10, test_size=10, max_number=9999)
    root = tmp_path_factory.mktemp("numbers")
    files = {}
    for split in ("train", "valid"):
        for side, lines in (("src", splits[split].src), ("tgt", splits[split].tgt)):
            path = root / f"{split}.{side}"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            files[f"{split}_{side}"] = str(path)
    return files


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, number_files):
    """A run of 4 updates (evaluated at 2 and 4), kept as a template for the resume tests."""
    run = tmp_path_factory.mktemp("runs") / "run"
    code = main(["train", *data_flags(number_files), *TINY, "--max-steps", "4",
                 "--eval-every", "2", "--log-every", "1", "--out", str(run), "--json"])
    assert code == 0
    return run
