"""inference.translation_eval: the test set a run is scored on."""

from __future__ import annotations

import pytest

from transformer import ModelConfig
from transformer.data.builtin_task import number_task_splits
from transformer.errors import InputError
from transformer.inference.translation_eval import read_test_set
from transformer.model_dir import RunRecord


def run(**training) -> RunRecord:
    """The record of a run that trained with ``training``."""
    return RunRecord.from_dict({"model": ModelConfig.tiny(10).to_dict(), "training": training})


def test_the_run_s_own_corpus_and_seed_are_the_default():
    sources, references, name = read_test_set(run(data="numbers", seed=3))
    test = number_task_splits(3)["test"]
    assert (sources, references, name) == (test.src, test.tgt, test.name)
    valid = number_task_splits(3)["valid"]
    assert read_test_set(run(data="numbers", seed=3), split="valid")[0] == valid.src


def test_line_aligned_files(tmp_path):
    src, ref = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("one\ntwo\n", encoding="utf-8")
    ref.write_text("eins\nzwei\n", encoding="utf-8")
    assert read_test_set(None, src_file=str(src), ref_file=str(ref))[:2] == (["one", "two"],
                                                                           ["eins", "zwei"])
    ref.write_text("eins\n", encoding="utf-8")
    with pytest.raises(InputError, match="has 2 lines"):
        read_test_set(None, src_file=str(src), ref_file=str(ref))
    with pytest.raises(InputError, match="both"):
        read_test_set(None, src_file=str(src))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"data": "wmt14"}, "unknown corpus"),
    ({"data": "numbers", "split": "dev"}, "unknown numbers split"),
])
def test_bad_test_sets_name_the_value(kwargs, match):
    with pytest.raises(InputError, match=match):
        read_test_set(None, **kwargs)
