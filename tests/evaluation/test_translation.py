"""evaluation.translation: the test set a run is scored on, and the checks before any decoding."""

from __future__ import annotations

import pytest

from transformer.data.builtin_task import number_task_splits
from transformer.errors import InputError
from transformer.evaluation.translation import load_translator, read_test_set


def test_the_run_s_own_corpus_and_seed_are_the_default():
    sources, references, name = read_test_set({"data": "numbers", "seed": 3})
    test = number_task_splits(3)["test"]
    assert (sources, references, name) == (test.src, test.tgt, test.name)
    valid = number_task_splits(3)["valid"]
    assert read_test_set({"data": "numbers", "seed": 3}, split="valid")[0] == valid.src


def test_line_aligned_files(tmp_path):
    src, ref = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("one\ntwo\n", encoding="utf-8")
    ref.write_text("eins\nzwei\n", encoding="utf-8")
    assert read_test_set({}, src_file=str(src), ref_file=str(ref))[:2] == (["one", "two"],
                                                                           ["eins", "zwei"])
    ref.write_text("eins\n", encoding="utf-8")
    with pytest.raises(InputError, match="has 2 lines"):
        read_test_set({}, src_file=str(src), ref_file=str(ref))
    with pytest.raises(InputError, match="both"):
        read_test_set({}, src_file=str(src))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"data": "wmt14"}, "unknown corpus"),
    ({"data": "numbers", "split": "dev"}, "unknown numbers split"),
])
def test_bad_test_sets_name_the_value(kwargs, match):
    with pytest.raises(InputError, match=match):
        read_test_set({}, **kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"batch_size": 0}, "--batch-size"),
    ({"beam_size": 2, "nbest": 3}, "--nbest"),
])
def test_bad_decoding_values_fail_before_loading(tmp_path, kwargs, match):
    with pytest.raises(InputError, match=match):
        load_translator(tmp_path / "no-model-here", **kwargs)
