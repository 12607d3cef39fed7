"""The command line of every verb, fed generated arguments: its own flags in any order with any
value (text, numbers, NaN, negative, empty, paths to garbage, folders, missing files, real model
directories). Only exit 0 or 2 (bad usage, or one ``transformer: error:`` line) may come out,
never a traceback or exit 1.

Training and corpus scoring are replaced by a stub once their configuration is built (their
readers are fuzzed in test_readers.py; a real run per example would take minutes); everything the
parser and the configuration layer do with the arguments runs for real.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer.cli import build_parser, main

FAST = 100
SLOW = int(os.environ.get("TRANSFORMER_FUZZ_EXAMPLES", "10000"))
READ = {"model", "models", "input", "file", "train", "valid", "test", "resume", "set:train_src",
        "set:train_tgt", "set:valid_src", "set:valid_tgt", "runs", "src_file", "ref_file"}
WRITE = {"out", "output"}
SKIP = {"--measure", "--progress", "--no-progress", "--help", "-h", "-v", "--verbose"}
CORPUS = {"data", "set:data"}  # a real corpus name would read a whole corpus per example


class Reached(Exception):
    """A stubbed training or scoring function was called: the arguments were accepted."""


def stub(*args, **kwargs):
    raise Reached


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every verb (and sub-verb) name -> its parser."""
    def children(parser):
        for action in parser._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                return action.choices
        return {}

    found = {}
    for name, parser in children(build_parser()).items():
        subs = children(parser)
        if subs:
            found.update({f"{name} {sub}": p for sub, p in subs.items()})
        found[name] = parser
    return found


# `serve` runs until stopped when its arguments are good, so it is not fuzzed here; its bad flags
# are tested in tests/serving/test_cli.py
VERBS = {name: p for name, p in verb_parsers().items() if name != "serve"}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    from transformer import ModelConfig, Transformer
    from transformer.data.builtin_task import english_number
    from transformer.data.tokenizer import Tokenizer
    from transformer.model_dir import save_model_dir

    root = tmp_path_factory.mktemp("cli_fuzz")
    tok = Tokenizer.train([english_number(n) for n in range(1, 300)], vocab_size=40,
                          byte_fallback=False)
    model = root / "model"
    save_model_dir(model, Transformer(ModelConfig.tiny(tok.vocab_size, d_model=8, d_ff=16,
                                                       num_heads=2, num_encoder_layers=1,
                                                       num_decoder_layers=1, max_len=24)),
                   config={"training": {"decode_max_len_a": 1.0, "decode_max_len_b": 3}},
                   src_tokenizer=tok, tgt_tokenizer=tok)
    (root / "garbage.bin").write_bytes(b"\xff\xfe\x00garbage\r\n\x1f\x8b")
    (root / "lines.txt").write_text("one\ntwo hundred\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "folder").mkdir()
    reads = [str(model), str(root / "garbage.bin"), str(root / "lines.txt"), str(root / "empty.txt"),
             str(root / "folder"), str(root / "missing"), "", "auto"]
    writes = [str(root / "out" / "a"), str(root / "garbage.bin" / "x"), str(root / "folder"),
              str(root / "picture.png"), str(root / "x.svg")]
    return root, reads, writes


def values(action: argparse.Action, reads: list[str], writes: list[str]) -> st.SearchStrategy:
    dest = action.dest
    if dest in WRITE:
        return st.sampled_from(writes)
    if dest in READ:
        return st.sampled_from(reads)
    junk = (st.text(max_size=12) | st.integers(-5, 64).map(str)
            | st.sampled_from(["nan", "inf", "-inf", "1e309", "0", "-0.5", "0.5", "2", "", " ",
                               "\x00", "é", "--", "-1"]))
    if action.choices and dest not in CORPUS:
        return st.sampled_from([str(c) for c in action.choices]) | junk
    return junk


@st.composite
def argv(draw, verb: str, reads: list[str], writes: list[str]) -> list[str]:
    parser = VERBS[verb]
    out = verb.split()
    flags = [a for a in parser._actions  # noqa: SLF001
             if a.option_strings and not set(a.option_strings) & SKIP]
    for action in parser._actions:  # noqa: SLF001
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            count = 1 if action.nargs is None else draw(st.integers(0, 2))
            out += [draw(values(action, reads, writes)) for _ in range(count)]
    for action in draw(st.lists(st.sampled_from(flags), max_size=8)) if flags else []:
        out.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs == 0:
            continue
        count = action.nargs if isinstance(action.nargs, int) else (
            1 if action.nargs in (None, "?") else draw(st.integers(1, 2)))
        out += [draw(values(action, reads, writes)) for _ in range(count)]
    return out


def run_cli(args: list[str]) -> int:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(args)
        except SystemExit as exit_:  # argparse: 2 for bad usage
            code = exit_.code if isinstance(exit_.code, int) else 2
        except Reached:
            code = 0
    err = stderr.getvalue()
    assert "Traceback" not in err, (args, err[-2000:])
    assert code in (0, 2), (args, code, err[-2000:])
    if code == 2 and "transformer: error:" in err:
        assert err.count("transformer: error:") == 1, err
    return code


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_arguments(verb, slow, paths, monkeypatch):
    root, reads, writes = paths
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "stdin", sys.stdin)  # restored after the test
    import transformer.inference.classifier_eval as eval_classifier
    import transformer.inference.translation_eval as eval_translation
    import transformer.training.demo as demo
    import transformer.training.train_classifier as train_classifier
    import transformer.training.train_translation as train_translation

    for module, name in [(train_translation, "start_translation"),
                         (train_translation, "resume_translation"),
                         (train_translation, "train_or_resume_translation"), (demo, "run_demo"),
                         (train_classifier, "train_classifier_run"),
                         (train_classifier, "resume_classifier"),
                         (train_classifier, "train_or_resume_classifier"),
                         (eval_translation, "evaluate_translation"),
                         (eval_classifier, "evaluation_data")]:
        monkeypatch.setattr(module, name, stub)

    @settings(max_examples=SLOW if slow else FAST, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(args=argv(verb, reads, writes))
    def check(args):
        sys.stdin = io.TextIOWrapper(io.BytesIO(b"three\n\xff\x00\r\nfour thousand\n"))
        run_cli(args)

    check()
