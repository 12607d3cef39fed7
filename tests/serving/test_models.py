"""The models a server holds (serving/models.py), below the HTTP layer: what /v1/models says, the
decoding defaults a run's config gives, the languages a request's lines are split and joined in,
and the errors and log line of loading."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.config.decoding import DecodeOptions
from transformer.errors import InputError
from transformer.inference.lines import translate_lines
from transformer.inference.loader import resolve_precision
from transformer.model_dir import load_model_dir, save_model_dir
from transformer.serving.models import load_served, parse_model_specs


def translator_dir(path, tokenizer, training=None, *, task="translation"):
    """A tiny random translator; ``training`` is its config's training section (None: none)."""
    torch.manual_seed(0)
    config = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, d_model=32, d_ff=64, num_heads=4,
                              num_encoder_layers=1, num_decoder_layers=1, max_len=48, dropout=0.0)
    extra = {"training": training} if training is not None else {}
    save_model_dir(path, Transformer(config), config={"task": task, **extra},
                   src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    return path


def drop_key(run_dir, key):
    path = run_dir / "config.json"
    config = json.loads(path.read_text())
    del config[key]
    path.write_text(json.dumps(config))


def test_describe_a_translator(served, translation_dir):
    model = load_model_dir(translation_dir).model
    assert served["numbers"].describe() == {
        "name": "numbers", "task": "translation", "max_tokens": 48,
        "parameters": sum(p.numel() for p in model.parameters()), "precision": "fp32",
        "source_language": "en", "target_language": "de", "engine": "torch"}


def test_a_served_model_says_which_engine_decodes(translation_dir, tmp_path):
    """``serve --engine ctranslate2``: /v1/models names the engine, and the translations are
    CTranslate2's (equal to ours on this model)."""
    pytest.importorskip("ctranslate2")
    run = tmp_path / "numbers"
    shutil.copytree(translation_dir, run)
    served = load_served({"numbers": str(run)}, precision="fp32", engine="ctranslate2")["numbers"]
    assert served.describe()["engine"] == "ctranslate2"
    options = served.default_options(beam_size=1)
    ours = load_served({"numbers": str(run)}, precision="fp32", engine="torch")["numbers"]
    texts = ["seven", "forty-two", "three hundred twelve"]
    assert ([t.text for t in served.translate_batch([(texts, options)])[0]]
            == [t.text for t in ours.translate_batch([(texts, options)])[0]])


def test_describe_a_classifier(served, classifier_dir):
    model = load_model_dir(classifier_dir).model
    assert served["labels"].describe() == {
        "name": "labels", "task": "classification", "max_tokens": 31,  # 32 less the CLS token
        "parameters": sum(p.numel() for p in model.parameters()), "precision": "fp32",
        "labels": ["small", "round", "large"], "multi_label": True}


def test_a_config_without_task_or_training_serves_a_translator(tmp_path, tokenizer):
    """config.json from before ``task`` and ``training`` were written: a translator with the
    decoding defaults of ``translate`` (1.5 x + 10) and no languages."""
    path = translator_dir(tmp_path / "old", tokenizer)
    drop_key(path, "task")
    one = load_served({"old": str(path)}, precision="fp32")["old"]
    assert one.task == "translation" and one.translator is not None
    assert one.describe()["source_language"] is None and one.describe()["target_language"] is None
    assert one.default_options() == DecodeOptions(max_len_a=1.5, max_len_b=10)
    assert one.default_options(beam_size=3) == DecodeOptions(max_len_a=1.5, max_len_b=10,
                                                             beam_size=3)


def test_default_options_come_from_the_run(served):
    assert served["numbers"].default_options() == DecodeOptions(max_len_a=0.5, max_len_b=3)
    assert served["numbers"].default_options(max_len_b=7).max_len_b == 7


def test_lines_are_split_and_joined_in_the_runs_languages(tmp_path, tokenizer):
    """A German source splits as German ("usw." ends no sentence there, it does in English) and a
    Chinese target joins its sentences without a space: what translate_lines does given the run's
    languages, not the defaults."""
    path = translator_dir(tmp_path / "dezh", tokenizer, {"src_lang": "de", "tgt_lang": "zh"})
    one = load_served({"dezh": str(path)}, precision="fp32")["dezh"]
    options = one.default_options()
    one.translator.options = options
    german = "drei usw. vier."
    (kept,) = one.translate_batch([([german], options)])
    assert kept[0].sentences == 1
    assert translate_lines(one.translator, [german], src_lang="en")[0].sentences == 2
    two = "Drei! Vier!"
    (joined,) = one.translate_batch([([two], options)])
    want = translate_lines(one.translator, [two], src_lang="de", tgt_lang="zh")
    spaced = translate_lines(one.translator, [two], src_lang="de", tgt_lang=None)
    assert want[0].sentences == 2 and want[0].text != spaced[0].text  # neither is empty
    assert [t.text for t in joined] == [t.text for t in want]


def test_a_request_without_split_is_split_into_sentences(served):
    one = served["numbers"]
    options = one.default_options()
    line = "three. four. five."
    default, whole, split = one.translate_batch([([line], options), ([line], options, False),
                                                 ([line], options, True)])
    assert default[0].sentences == split[0].sentences == 3
    assert whole[0].sentences == 1


def test_classify_batch_answers_each_request_with_its_own_rows(served):
    one = served["labels"]
    pred = one.classifier.predict(["one", "two hundred", "three"])
    rows = one.classify_batch([["one"], ["two hundred", "three"]])
    assert [len(r) for r in rows] == [1, 2]
    for i, row in enumerate(rows[0] + rows[1]):
        assert row["probabilities"] == {n: float(p) for n, p in zip(pred.label_names, pred.probs[i],
                                                                    strict=True)}
        assert row["labels"] == [{"label": n, "probability": p} for n, p in pred.labels(i)]


def test_thresholds_default_per_label_for_a_multi_label_model(tmp_path, served, classifier_dir):
    from transformer.evaluation.label_metrics import DEFAULT_THRESHOLD

    assert served["labels"].thresholds() == {"small": 0.4, "round": 0.5, "large": 0.6}
    copy = tmp_path / "labels"
    shutil.copytree(classifier_dir, copy)
    drop_key(copy, "thresholds")
    one = load_served({"labels": str(copy)}, precision="fp32")["labels"]
    assert one.thresholds() == dict.fromkeys(["small", "round", "large"], DEFAULT_THRESHOLD)


def test_a_bad_classifier_config_names_its_file(tmp_path, classifier_dir):
    copy = tmp_path / "labels"
    shutil.copytree(classifier_dir, copy)
    path = copy / "config.json"
    config = json.loads(path.read_text())
    config["labels"] = ["small", "round"]
    path.write_text(json.dumps(config))
    with pytest.raises(InputError) as err:
        load_served({"labels": str(copy)}, precision="fp32")
    assert str(err.value) == f"{path}: 'labels' must list the model's 3 label names"


def test_load_served_packs_the_decoder_at_load(translation_dir, monkeypatch):
    from transformer.decoding import fast_decoder

    made, real = [], fast_decoder.layer_step

    def counted(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fast_decoder, "layer_step", counted)
    one = load_served({"numbers": str(translation_dir)}, precision="fp32")["numbers"]
    layers = len(one.translator.model.decoder.layers)
    assert len(made) == layers  # every decoder layer's step made at load
    one.translator.translate(["seven", "forty-two"])
    assert len(made) == layers  # not left to the first request, nor made again by it


def test_load_served_passes_the_device(monkeypatch, translation_dir):
    import transformer.serving.models as models

    seen = []

    def spy(path, *, device="cpu"):
        seen.append(device)
        return load_model_dir(path, device=device)

    monkeypatch.setattr(models, "load_model_dir", spy)
    load_served({"numbers": str(translation_dir)}, precision="fp32", device=torch.device("cpu"))
    assert seen == [torch.device("cpu")]


def test_loading_logs_each_model(caplog, translation_dir):
    with caplog.at_level(logging.INFO, logger="transformer.serving.models"):
        load_served({"numbers": str(translation_dir)}, precision="fp32")
    assert f"loaded numbers (translation) from {translation_dir}" in caplog.messages


def test_a_precision_the_decoder_refuses_names_the_model(monkeypatch, translation_dir):
    import transformer.decoding.fast_decoder as fast_decoder

    monkeypatch.setattr(fast_decoder, "int8_engine", lambda: None)
    with pytest.raises(InputError) as err:
        load_served({"numbers": str(translation_dir)}, precision="int8")
    assert str(err.value) == (f"{translation_dir}: --precision int8: int8 decoding needs "
                              "PyTorch's x86, fbgemm or qnnpack quantized engine")


def test_resolve_precision_refuses_an_unknown_one(served):
    with pytest.raises(InputError) as err:
        resolve_precision(served["numbers"].loaded, "fp8")
    assert str(err.value) == "--precision must be one of auto, fp32, bf16, int8, got 'fp8'"


@pytest.mark.parametrize(("specs", "want"), [
    (["runs/m30k"], {"m30k": "runs/m30k"}),
    (["runs/m30k/"], {"m30k": "runs/m30k/"}),
    (["en-de=runs/a=b"], {"en-de": "runs/a=b"}),
    (["a=runs/x", "b=runs/x"], {"a": "runs/x", "b": "runs/x"}),
])
def test_parse_model_specs(specs, want):
    assert parse_model_specs(specs) == want


@pytest.mark.parametrize(("specs", "message"), [
    (["=runs/x"], "--model '=runs/x': expected [NAME=]RUN_DIR"),
    (["a="], "--model 'a=': expected [NAME=]RUN_DIR"),
    (["/"], "--model '/': expected [NAME=]RUN_DIR"),
    (["runs/x", "x=runs/y"], "--model 'x=runs/y': the name 'x' is given twice"),
])
def test_parse_model_specs_refuses(specs, message):
    with pytest.raises(InputError) as err:
        parse_model_specs(specs)
    assert str(err.value) == message
