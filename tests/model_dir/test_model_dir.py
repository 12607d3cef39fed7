"""The model directory's every refusal, word for word (each names the file and what is wrong), and
what it keeps: a distinct target tokenizer, old configs without ``task``, the device asked for,
non-ASCII text in any locale, a stable config.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from transformer import ModelConfig, Transformer, TransformerClassifier
from transformer.errors import InputError
from transformer.model_dir import (
    build_model,
    header_shapes,
    load_model_dir,
    load_tokenizer_dir,
    load_weights,
    read_config,
    save_model_dir,
    unwrap,
)
from transformer.model_dir.weights import _aliases

SHAPE = dict(d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1)


def model_for(tok, **overrides):
    return Transformer(ModelConfig.tiny(tok.vocab_size, **{**SHAPE, **overrides}))


def saved(run_dir, tok, **overrides):
    save_model_dir(run_dir, model_for(tok, **overrides), config={}, src_tokenizer=tok,
                   tgt_tokenizer=tok)
    return run_dir


def message(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as err:
        call(*args, **kwargs)
    return str(err.value)


def weights(model):
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def test_aliases_group_the_tied_names(number_tokenizer):
    tied = model_for(number_tokenizer, share_embeddings=True, tie_embeddings=True)
    groups = sorted(_aliases(tied), key=len)
    assert groups[-1] == {"src_embed.token.weight", "tgt_embed.token.weight",
                          "output_projection.weight"}
    assert all(len(g) == 1 for g in groups[:-1])
    assert len(groups) == len(tied.state_dict()) - 2
    untied = model_for(number_tokenizer)
    assert sorted(map(sorted, _aliases(untied))) == [[n] for n in sorted(untied.state_dict())]


def test_missing_weights_file(tmp_path, number_tokenizer):
    path = tmp_path / "model.safetensors"
    assert message(load_weights, model_for(number_tokenizer), path) == f"{path}: missing weights file"


@pytest.mark.parametrize("content", [b"not a safetensors file at all", b"", "half"])
def test_unreadable_weights_say_what_safetensors_says(tmp_path, number_tokenizer, content):
    model = model_for(number_tokenizer)
    path = tmp_path / "model.safetensors"
    save_file(weights(model), str(path))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if content == "half" else content)
    with pytest.raises(SafetensorError) as err:
        safe_open(str(path), framework="pt")
    reason = str(err.value).splitlines()[0]
    assert message(load_weights, model, path) == f"{path}: not a readable safetensors file ({reason})"


def test_the_header_read_in_plain_python_is_what_safetensors_reads(tmp_path, monkeypatch):
    import transformer.model_dir.weights as weights_module

    tensors = {"a": torch.zeros(3, 4), "b": torch.ones(5, dtype=torch.bfloat16),
               "c": torch.arange(6, dtype=torch.int64).reshape(1, 2, 3), "d": torch.zeros(0, 2),
               "e": torch.tensor(1.5)}
    path = tmp_path / "w.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt"})
    with safe_open(str(path), framework="pt") as f:
        theirs = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    monkeypatch.setattr(weights_module, "safe_open", None)  # the plain reader alone
    assert header_shapes(path) == theirs == {name: tuple(t.shape) for name, t in tensors.items()}


def _rewrite_header(path, change):
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = change(json.loads(raw[8:8 + size]))
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + size:])


@pytest.mark.parametrize("change", [
    lambda h: {**h, "a": {**h["a"], "data_offsets": [8, 56]}},  # a gap before "a"
    lambda h: {**h, "a": {**h["a"], "shape": [3, 5]}},  # bytes that do not fit the shape
    lambda h: {**h, "a": {**h["a"], "dtype": "F99"}},
    lambda h: {**h, "a": {**h["a"], "shape": 12}},
    lambda h: {**h, "__metadata__": {"format": 1}},
    lambda h: json.dumps(h)[:-1].encode() + b', "a": {}}',  # a name twice
    lambda h: [h],
], ids=["gap", "shape", "dtype", "shape-not-a-list", "metadata", "repeated", "not-an-object"])
def test_a_header_the_plain_reader_refuses_gets_safetensors_own_words(tmp_path, change):
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.zeros(3, 4), "b": torch.ones(2)}, str(path))
    _rewrite_header(path, change)
    with pytest.raises(SafetensorError) as err:
        safe_open(str(path), framework="pt")
    with pytest.raises(InputError) as ours:
        header_shapes(path)
    assert str(ours.value) == f"{path}: not a readable safetensors file ({str(err.value).splitlines()[0]})"


def test_a_missing_tensor_is_named(tmp_path, number_tokenizer):
    model = model_for(number_tokenizer)
    state = weights(model)
    name = sorted(state)[-1]
    del state[name]
    path = tmp_path / "w.safetensors"
    save_file(state, str(path))
    assert name == "tgt_embed.token.weight"  # the switch behind it is named too
    assert message(load_weights, model, path, against="runs/x/config.json") == (
        f"{path} does not match the model of runs/x/config.json: tensor {name} is missing "
        "(model.share_embeddings is False)")


def test_an_unexpected_tensor_is_named(tmp_path, number_tokenizer):
    model = model_for(number_tokenizer)
    path = tmp_path / "w.safetensors"
    save_file({**weights(model), "extra.scale": torch.ones(2)}, str(path))
    assert message(load_weights, model, path) == (
        f"{path} does not match the model of config.json: unexpected tensor extra.scale")


@pytest.mark.parametrize(("raised", "reason"), [
    (OSError(5, "Input/output error"), "[Errno 5] Input/output error"),
    (MemoryError(), "MemoryError"),
])
def test_a_read_error_after_the_header_is_one_line(tmp_path, number_tokenizer, monkeypatch,
                                                   raised, reason):
    import safetensors.torch

    model = model_for(number_tokenizer)
    path = tmp_path / "w.safetensors"
    save_file(weights(model), str(path))

    def failing(*args, **kwargs):
        raise raised

    monkeypatch.setattr(safetensors.torch, "load_model", failing)  # read where the weights load
    assert message(load_weights, model, path) == f"{path}: cannot read the weights ({reason})"


def test_load_weights_fills_every_tensor(tmp_path, number_tokenizer):
    source, target = model_for(number_tokenizer), model_for(number_tokenizer)
    path = tmp_path / "w.safetensors"
    save_file(weights(source), str(path))
    load_weights(target, path)
    for name, value in source.state_dict().items():
        assert torch.equal(target.state_dict()[name], value), name


def test_unwrap_takes_the_module_out_of_a_wrapper(number_tokenizer):
    model = model_for(number_tokenizer)

    class Wrapper(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    assert unwrap(Wrapper(model)) is model
    assert unwrap(model) is model


def config_of(model, **extra):
    return {"model": model.config.to_dict(), **extra}


def test_build_model_without_task_is_a_translator(number_tokenizer):
    built = build_model(config_of(model_for(number_tokenizer)))
    assert type(built) is Transformer


def test_build_model_classifier(number_tokenizer):
    model = model_for(number_tokenizer)
    built = build_model(config_of(model, task="classification", classifier={"num_labels": 3},
                                  labels=["a", "b", "c"]))
    assert type(built) is TransformerClassifier and built.num_labels == 3
    assert message(build_model, config_of(model, task="classification")) == (
        "config.json: no 'classifier' section")


@pytest.mark.parametrize(("config", "want"), [
    ({"task": "poetry", "model": {}},
     "runs/x/config.json: unknown task 'poetry' (expected one of translation, classification)"),
    ({"task": "translation"}, "runs/x/config.json: no 'model' section"),
    ({"model": {"d_model": 3, "num_heads": 2}}, "runs/x/config.json: bad model configuration: "),
    ({"model": {"src_vocab_size": 2**40}},
     "runs/x/config.json: cannot build the model it describes ("),  # PyTorch's allocator error
])
def test_build_model_refuses(number_tokenizer, config, want):
    if "model" in config and config["model"]:
        config = {**config, "model": {**model_for(number_tokenizer).config.to_dict(), **config["model"]}}
    got = message(build_model, config, source="runs/x/config.json")
    assert got.startswith(want) and "\n" not in got
    if want.endswith(": "):  # the reason is ModelConfig's own first line
        with pytest.raises(ValueError) as err:
            ModelConfig.from_dict(config["model"])
        assert got == want + str(err.value).splitlines()[0]


def test_a_bad_model_config_names_the_run_directorys_file(tmp_path, number_tokenizer):
    run = saved(tmp_path / "run", number_tokenizer)
    config = json.loads((run / "config.json").read_text())
    config["model"]["num_heads"] = 3
    (run / "config.json").write_text(json.dumps(config))
    assert message(load_model_dir, run).startswith(f"{run / 'config.json'}: bad model configuration: ")


@pytest.mark.parametrize(("content", "want"), [
    (b'{\n  "format_version": 1,\n  oops\n}', ": not valid JSON at line 3"),
    (b'{"format_version": 1, "note": "\xff"}', ": not valid JSON"),
    (b'[1, 2]', ": expected a JSON object"),
    (b'{"format_version": 7}', ": format_version 7 is not 1"),
    (b'{}', ": format_version None is not 1"),
])
def test_read_config_refuses(tmp_path, content, want):
    (tmp_path / "config.json").write_bytes(content)
    assert message(read_config, tmp_path) == f"{tmp_path / 'config.json'}{want}"


def test_read_config_of_a_missing_file(tmp_path):
    assert message(read_config, tmp_path) == (
        f"{tmp_path / 'config.json'}: missing (is {tmp_path} a directory written by transformer train?)")
    assert message(read_config, tmp_path / "nothing") == f"{tmp_path / 'nothing'}: no such model directory"


def test_non_ascii_text_survives_an_ascii_locale(tmp_path, number_tokenizer):
    """config.json is UTF-8 whatever the locale: a run saved and read under LC_ALL=C without
    Python's UTF-8 mode keeps "zwölf" (the locale's codec is ASCII there)."""
    saved(tmp_path / "run", number_tokenizer)
    code = ("import sys; from pathlib import Path; from transformer.model_dir import read_config;"
            "from transformer.atomic import atomic_write_text;"
            "atomic_write_text(Path(sys.argv[1]) / 'note.txt', 'zw\\u00f6lf');"
            "print(ascii(read_config(sys.argv[1])['training']))")
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    config["training"] = {"note": "zwölf"}
    (tmp_path / "run" / "config.json").write_text(json.dumps(config, ensure_ascii=False),
                                                  encoding="utf-8")
    import transformer

    source = Path(transformer.__file__).resolve().parents[1]  # the code under test, not an install
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
           "PYTHONIOENCODING": "ascii",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == ascii({"note": "zwölf"})
    assert (tmp_path / "run" / "note.txt").read_bytes() == "zwölf".encode()


def test_tokenizers_that_do_not_fit_name_their_side(tmp_path, number_tokenizer):
    from transformer.data.tokenizer import Tokenizer
    from transformer.data.tokenizer_pair import save_tokenizers

    tok = number_tokenizer
    other = Tokenizer.train(["eins zwei drei vier fünf sechs sieben acht neun zehn"] * 5,
                            vocab_size=40, byte_fallback=False)
    run = saved(tmp_path / "run", tok)
    where = run / "tokenizer"
    save_tokenizers(tok, other, where)
    assert message(load_model_dir, run) == (
        f"{where}: the target tokenizer has 40 pieces but the model's vocabulary is {tok.vocab_size}")
    save_tokenizers(other, tok, where)
    assert message(load_model_dir, run) == (
        f"{where}: the source tokenizer has 40 pieces but the model's vocabulary is {tok.vocab_size}")


def test_missing_tokenizer_directory(tmp_path, number_tokenizer):
    import shutil

    run = saved(tmp_path / "run", number_tokenizer)
    shutil.rmtree(run / "tokenizer")
    want = f"{run / 'tokenizer'}: missing tokenizer directory"
    assert message(load_tokenizer_dir, run) == want
    assert message(load_model_dir, run) == want


def test_save_model_dir_makes_the_parents_and_keeps_a_distinct_target_tokenizer(tmp_path,
                                                                                number_tokenizer):
    from transformer.data.tokenizer import Tokenizer

    src = number_tokenizer
    tgt = Tokenizer.train(["eins zwei drei vier fünf sechs sieben acht neun zehn"] * 5,
                          vocab_size=40, byte_fallback=False)
    model = Transformer(ModelConfig.tiny(src.vocab_size, **SHAPE, tgt_vocab_size=tgt.vocab_size))
    run = tmp_path / "a" / "b" / "run"
    save_model_dir(run, model, config={"training": {"z": 1, "a": [1, 2]}}, src_tokenizer=src,
                   tgt_tokenizer=tgt)
    loaded = load_model_dir(run)
    assert loaded.src_tokenizer == src and loaded.tgt_tokenizer == tgt
    text = (run / "config.json").read_text()  # stable for diffs: sorted keys, two spaces, newline
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"


def test_save_model_dir_under_a_file(tmp_path, number_tokenizer):
    (tmp_path / "file").write_text("x")
    run = tmp_path / "file" / "run"
    assert message(saved, run, number_tokenizer) == f"{run}: {tmp_path / 'file'} is not a directory"


def test_a_config_without_task_loads_a_translator(tmp_path, number_tokenizer):
    run = saved(tmp_path / "run", number_tokenizer)
    config = json.loads((run / "config.json").read_text())
    del config["task"]
    (run / "config.json").write_text(json.dumps(config))
    loaded = load_model_dir(run)
    assert loaded.tgt_tokenizer == number_tokenizer and type(loaded.model) is Transformer


def test_load_model_dir_puts_the_model_on_the_device(tmp_path, number_tokenizer):
    run = saved(tmp_path / "run", number_tokenizer)
    loaded = load_model_dir(run, device="meta")
    assert {p.device.type for p in loaded.model.parameters()} == {"meta"}


def test_a_lazy_model_reads_the_weights_at_first_use_unless_they_were_replaced(tmp_path,
                                                                                number_tokenizer):
    run = saved(tmp_path / "run", number_tokenizer)
    want = weights(load_model_dir(run).model)
    loaded = load_model_dir(run, lazy=True)
    assert not loaded.weights_read and loaded.config.d_model == SHAPE["d_model"]
    got = weights(loaded.model)  # read now
    assert loaded.weights_read and all(torch.equal(got[k], v) for k, v in want.items())

    stale = load_model_dir(run, lazy=True)
    stat = (run / "model.safetensors").stat()
    saved(tmp_path / "run", number_tokenizer)  # training wrote new weights meanwhile
    os.utime(run / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert "model.safetensors: replaced after the run was opened" in message(lambda: stale.model)
    assert not stale.weights_read
