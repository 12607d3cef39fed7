"""The record of config.json: every field parsed once, every default in one place, every refusal
one line naming the file and the field; and the loader comparing the record's shapes with the
weights before anything is allocated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from transformer import ModelConfig, Transformer
from transformer.config.decoding import MAX_LEN_A, MAX_LEN_B, DecodeOptions
from transformer.errors import InputError
from transformer.model_dir import (
    ClassifierHead,
    RunRecord,
    TrainedOn,
    load_model_dir,
    read_record,
    save_model_dir,
)

SHAPE = dict(d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1)
SOURCE = "runs/x/config.json"


def model_section(**overrides) -> dict:
    return ModelConfig.tiny(40, **{**SHAPE, **overrides}).to_dict()


def parse(**data) -> RunRecord:
    return RunRecord.from_dict({"model": model_section(), **data}, source=SOURCE)


def refusal(**data) -> str:
    with pytest.raises(InputError) as err:
        parse(**data)
    return str(err.value)


def test_a_translation_record_with_nothing_but_a_model_takes_every_default():
    record = parse()
    assert record.task == "translation" and record.is_translation
    assert record.model == ModelConfig.tiny(40, **SHAPE)
    assert (record.src_lang, record.tgt_lang) == (None, None)
    assert record.languages == ("en", None)  # the sentence splitter's fallback; joined with spaces
    assert (record.decode_max_len_a, record.decode_max_len_b) == (MAX_LEN_A, MAX_LEN_B)
    assert record.decode_options() == DecodeOptions()
    assert record.trained_on == TrainedOn()
    assert record.classifier is None and record.labels == () and record.thresholds is None
    assert record.imported_from is None and record.averaged_from is None


def test_the_run_s_own_settings_are_read():
    record = parse(training={"src_lang": "de", "tgt_lang": "zh", "decode_max_len_a": 1.2,
                             "decode_max_len_b": 4, "data": "numbers", "seed": 7},
                   imported_from={"format": "marian"}, averaged_from=["a", "b"])
    assert record.languages == ("de", "zh")
    assert record.decode_options(beam_size=1) == DecodeOptions(beam_size=1, max_len_a=1.2,
                                                               max_len_b=4)
    assert record.trained_on == TrainedOn(corpus="numbers", seed=7)
    assert record.imported_from == {"format": "marian"} and record.averaged_from == ("a", "b")


def test_a_classifier_record():
    record = parse(task="classification", labels=["neg", "pos", "mixed"], thresholds=[0.2, 0.5, 1],
                   classifier={"num_labels": 3, "pooling": "cls", "multi_label": True},
                   data={"name": "goemotions", "recipe": {"seed": 1}, "text_column": 0,
                         "label_separator": "|"})
    assert record.classifier == ClassifierHead(num_labels=3, pooling="cls", multi_label=True)
    assert record.labels == ("neg", "pos", "mixed") and record.thresholds == (0.2, 0.5, 1.0)
    assert record.trained_on == TrainedOn(corpus="goemotions", recipe={"seed": 1}, text_column=0,
                                          label_column="label", label_separator="|")
    single = parse(task="classification", labels=["a", "b"], thresholds=[0.5, 0.5],
                   classifier={"num_labels": 2})
    assert single.thresholds is None  # a single-label model picks the most probable label


@pytest.mark.parametrize(("data", "want"), [
    ({"task": "poetry"}, "unknown task 'poetry' (expected one of translation, classification)"),
    ({"task": "classification"}, "no 'classifier' section"),
    ({"model": None}, "'model' must be a JSON object"),
    ({"model": {**model_section(), "num_heads": 3}},
     "bad model configuration: d_model=16 is not divisible by num_heads=3"),
    ({"training": [1]}, "'training' must be a JSON object"),
    ({"precision": "fp32"}, "'precision' must be a JSON object"),
    ({"training": {"decode_max_len_a": "long"}}, "training.decode_max_len_a must be a number, got 'long'"),
    ({"training": {"decode_max_len_b": 1.5}}, "training.decode_max_len_b must be a number, got 1.5"),
    ({"training": {"decode_max_len_a": float("nan")}}, "training.decode_max_len_a must be a number, got nan"),
    ({"training": {"src_lang": 7}}, "training.src_lang must be a language code, got 7"),
    ({"task": "classification", "classifier": {"num_labels": 2, "heads": 1}},
     "bad model configuration: ClassifierHead.__init__() got an unexpected keyword argument 'heads'"),
    ({"task": "classification", "classifier": {"num_labels": "2"}, "labels": ["a", "b"]},
     "bad model configuration: classifier.num_labels must be an integer, got '2'"),
    ({"task": "classification", "classifier": {"num_labels": 2}, "labels": ["a"]},
     "'labels' must list the model's 2 label names"),
    ({"task": "classification", "classifier": {"num_labels": 2}, "labels": ["a", 2]},
     "'labels' must be strings"),
    ({"task": "classification", "classifier": {"num_labels": 2, "multi_label": True},
      "labels": ["a", "b"], "thresholds": [0.5, 1.5]},
     "'thresholds' must hold one number in [0, 1] per label"),
    ({"averaged_from": "runs/a"}, "'averaged_from' must list directories"),
])
def test_every_refusal_names_the_file_and_the_field(data, want):
    if data.get("model", 0) is None:
        with pytest.raises(InputError) as err:
            RunRecord.from_dict({"model": None}, source=SOURCE)
        assert str(err.value) == f"{SOURCE}: {want}"
        return
    assert refusal(**data) == f"{SOURCE}: {want}"


def test_a_model_section_is_required():
    with pytest.raises(InputError, match=f"^{SOURCE}: no 'model' section$"):
        RunRecord.from_dict({"task": "translation"}, source=SOURCE)


def test_the_record_is_read_only_and_gives_the_file_back(tmp_path, number_tokenizer):
    run = tmp_path / "run"
    model = Transformer(ModelConfig.tiny(number_tokenizer.vocab_size, **SHAPE))
    save_model_dir(run, model, config={"training": {"src_lang": "en", "note": [1, {"a": 2}]}},
                   src_tokenizer=number_tokenizer, tgt_tokenizer=number_tokenizer)
    record = read_record(run)
    assert record.source == str(run / "config.json")
    assert record.to_dict() == json.loads((run / "config.json").read_text())
    with pytest.raises(TypeError):
        record.training["src_lang"] = "de"  # type: ignore[index]
    copy = record.to_dict()
    copy["training"]["note"][1]["a"] = 3
    assert record.section("training")["note"] == [1, {"a": 2}]


def saved(tmp_path: Path, tok) -> Path:
    run = tmp_path / "run"
    save_model_dir(run, Transformer(ModelConfig.tiny(tok.vocab_size, **SHAPE)), config={},
                   src_tokenizer=tok, tgt_tokenizer=tok)
    return run


def with_model(run: Path, **changes) -> None:
    config = json.loads((run / "config.json").read_text())
    config["model"].update(changes)
    (run / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(("changes", "tensor", "field"), [
    ({"d_model": 32, "num_heads": 2}, "src_embed.token.weight", "model.d_model is 32"),
    ({"d_ff": 64}, "decoder.layers.0.feed_forward.linear1.bias", "model.d_ff is 64"),
    ({"src_vocab_size": 2**40, "tgt_vocab_size": 2**40}, "src_embed.token.weight",
     f"model.src_vocab_size is {2**40}"),
])
def test_a_shape_the_weights_do_not_have_names_the_field(tmp_path, number_tokenizer, changes,
                                                         tensor, field):
    run = saved(tmp_path, number_tokenizer)
    with_model(run, **changes)
    with pytest.raises(InputError) as err:
        load_model_dir(run)
    message = str(err.value)
    assert message.startswith(f"{run / 'model.safetensors'} does not match the model of "
                              f"{run / 'config.json'}: {tensor} has shape ")
    assert message.endswith(f"({field})") and "\n" not in message


def test_more_layers_than_the_weights_hold_names_the_field(tmp_path, number_tokenizer):
    run = saved(tmp_path, number_tokenizer)
    with_model(run, num_decoder_layers=3)
    with pytest.raises(InputError, match=r": it holds 1 decoder layers "
                                         r"\(model\.num_decoder_layers is 3\)$"):
        load_model_dir(run)
    save_model_dir(run, Transformer(ModelConfig.tiny(number_tokenizer.vocab_size,
                                                     **{**SHAPE, "num_encoder_layers": 2})),
                   config={}, src_tokenizer=number_tokenizer, tgt_tokenizer=number_tokenizer)
    with_model(run, num_encoder_layers=1)
    with pytest.raises(InputError, match=r": it holds 2 encoder layers "
                                         r"\(model\.num_encoder_layers is 1\)$"):
        load_model_dir(run)


@pytest.mark.parametrize("gigabytes", [20, 64 * 1024])
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's VmHWM")
def test_a_huge_configuration_allocates_nothing(tmp_path, number_tokenizer, gigabytes):
    """A config.json describing a model of 20 GB (or 64 TiB) beside weights of kilobytes: refused
    before anything is built for real, in a fresh process whose peak memory stays that of Python
    and PyTorch (the 20 GB model would need 20,000 MB, and this machine may have less)."""
    run = saved(tmp_path, number_tokenizer)
    vocab = gigabytes * 2**30 // 4 // SHAPE["d_model"] // 2  # fp32 source and target tables
    with_model(run, src_vocab_size=vocab, tgt_vocab_size=vocab)
    # the child's own high-water mark (VmHWM is its address space's, from exec on; ru_maxrss
    # would also count the pages it shared with this process between fork and exec)
    code = ("import re, sys\nfrom pathlib import Path\nfrom transformer.errors import InputError\n"
            "from transformer.model_dir import load_model_dir\n"
            "try:\n    load_model_dir(sys.argv[1])\nexcept InputError as err:\n    print(err)\n"
            "status = Path('/proc/self/status').read_text()\n"
            "print(int(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1)) // 1024)\n")
    done = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True,
                          check=True, timeout=120)
    message, peak_mb = done.stdout.strip().splitlines()
    assert message.endswith(f"(model.src_vocab_size is {vocab})")
    assert int(peak_mb) < 1500, f"{peak_mb} MB"


def test_loading_a_model_leaves_the_compiler_unimported(tmp_path, number_tokenizer):
    """Nothing on the way from a directory to a model imports torch._dynamo (seconds at every
    start of a command: what building on the meta device, or a decorated reference op, costs)."""
    run = saved(tmp_path, number_tokenizer)
    code = ("import sys\nfrom transformer.inference import load_translator\n"
            "load_translator(sys.argv[1], precision='fp32').translate(['seven'])\n"
            "print('torch._dynamo' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "False"
