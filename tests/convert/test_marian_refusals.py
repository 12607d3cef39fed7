"""What the Marian importer accepts and refuses, word for word, on hand-written configs and
vocabularies (no transformers needed): every unsupported option, bad field, bad vocabulary and bad
weights file is one line naming its file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from transformer.config import ModelConfig
from transformer.convert.marian import (
    NEVER,
    convert_state,
    import_marian,
    model_config,
    read_weights,
    vocabulary_order,
)
from transformer.errors import InputError

PATH = Path("opus/config.json")
BASE = {"model_type": "marian", "encoder_attention_heads": 4, "decoder_attention_heads": 4,
        "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "activation_function": "swish",
        "scale_embedding": True, "d_model": 32, "encoder_layers": 2, "decoder_layers": 1,
        "max_position_embeddings": 64, "vocab_size": 10, "decoder_vocab_size": 10,
        "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True}


def refusal(call, *args, **kwargs) -> str:
    with pytest.raises(InputError) as err:
        call(*args, **kwargs)
    return str(err.value)


def test_the_config_maps_onto_ours():
    got = model_config(BASE, PATH, 12)
    want = ModelConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=32, num_heads=4,
                       num_encoder_layers=2, num_decoder_layers=1, d_ff=64, dropout=0.1,
                       attention_dropout=0.0, activation_dropout=0.0, max_len=64, pad_id=0,
                       activation="silu", positional="sinusoidal", positional_layout="halves",
                       share_embeddings=True, tie_embeddings=True)
    assert got == want


def test_the_configs_defaults_and_its_own_values():
    lean = {k: v for k, v in BASE.items() if k not in (
        "activation_function", "share_encoder_decoder_embeddings", "decoder_vocab_size",
        "tie_word_embeddings")}
    got = model_config(lean, PATH, 12)
    assert (got.activation, got.share_embeddings, got.tie_embeddings) == ("silu", True, True)
    own = {**BASE, "dropout": 0.3, "attention_dropout": 0.2, "activation_dropout": 0.1,
           "activation_function": "gelu", "tie_word_embeddings": False}
    got = model_config(own, PATH, 12)
    assert (got.dropout, got.attention_dropout, got.activation_dropout) == (0.3, 0.2, 0.1)
    assert (got.activation, got.tie_embeddings) == ("gelu", False)
    assert model_config({**BASE, "activation_function": "relu"}, PATH, 12).activation == "relu"


@pytest.mark.parametrize(("change", "what"), [
    ({"model_type": "bart"}, "model_type 'bart' (want marian)"),
    ({"decoder_attention_heads": 2}, "different encoder and decoder heads"),
    ({"decoder_ffn_dim": 32}, "different encoder and decoder d_ff"),
    ({"activation_function": "tanh"}, "activation_function 'tanh'"),
    ({"scale_embedding": False}, "scale_embedding false (we scale by sqrt(d))"),
    ({"scale_embedding": None}, "scale_embedding false (we scale by sqrt(d))"),
    ({"normalize_before": True}, "normalize_before (pre-LN Marian)"),
    ({"normalize_embedding": True}, "normalize_embedding"),
    ({"add_final_layer_norm": True}, "add_final_layer_norm"),
    ({"share_encoder_decoder_embeddings": False},
     "separate source and target vocabularies (share_encoder_decoder_embeddings false)"),
    ({"decoder_vocab_size": 12}, "a decoder vocabulary of another size"),
])
def test_unsupported_options(change, what):
    config = {**BASE, **change}
    if change.get("scale_embedding", True) is None:
        del config["scale_embedding"]
    assert refusal(model_config, config, PATH, 12) == f"{PATH}: {what} is not supported"


@pytest.mark.parametrize(("name", "value", "kind"), [
    ("d_model", "32", "int"), ("d_model", True, "int"), ("encoder_attention_heads", None, "int"),
    ("encoder_layers", 2.0, "int"), ("max_position_embeddings", None, "int"),
    ("encoder_ffn_dim", "64", "int"), ("decoder_layers", None, "int"),
])
def test_a_field_of_the_wrong_type(name, value, kind):
    config = {**BASE, name: value}
    if value is None:
        del config[name]
    assert refusal(model_config, config, PATH, 12) == (
        f"{PATH}: field {name!r} must be {kind}, got {value!r}")


VOCAB = {"</s>": 0, "<unk>": 1, "a": 2, "b": 3, "<pad>": 4}
VOCAB_PATH = Path("opus/vocab.json")


def test_our_vocabulary_order():
    ours, source = vocabulary_order(VOCAB, pad_id=4, eos_id=0, start_id=4, path=VOCAB_PATH)
    assert ours == ["<pad>", "<unk>", "<s>", "</s>", "a", "b"]
    assert source == [4, 1, 4, 0, 2, 3]
    ours, source = vocabulary_order({**VOCAB, "<s>": 5}, pad_id=4, eos_id=0, start_id=5,
                                    path=VOCAB_PATH)
    assert ours == ["<pad>", "<unk>", "<s>", "</s>", "a", "b"] and source == [4, 1, 5, 0, 2, 3]


@pytest.mark.parametrize(("vocab", "ids", "message"), [
    ({"</s>": 0, "<unk>": 1, "<pad>": 3}, (3, 0, 3), "opus/vocab.json: ids are not 0..2"),
    ({"</s>": 0, "a": 1, "<pad>": 2}, (2, 0, 2), "opus/vocab.json: no <unk> piece"),
    (VOCAB, (5, 0, 4), "opus/config.json: pad_token_id 5 is not in the vocabulary"),
    (VOCAB, (4, None, 4), "opus/config.json: eos_token_id None is not in the vocabulary"),
    (VOCAB, (4, 0, -1), "opus/config.json: decoder_start_token_id -1 is not in the vocabulary"),
    (VOCAB, (4, 0, "4"), "opus/config.json: decoder_start_token_id '4' is not in the vocabulary"),
    ({**VOCAB, "<s>": 5}, (4, 0, 4), "opus/vocab.json: piece '<s>' is a special piece of ours"),
])
def test_vocabulary_refusals(vocab, ids, message):
    pad, eos, start = ids
    assert refusal(vocabulary_order, vocab, pad_id=pad, eos_id=eos, start_id=start,
                   path=VOCAB_PATH) == message


def test_read_weights_takes_safetensors_first_then_a_pickle(tmp_path):
    tensors = {"shared.weight": torch.randn(3, 2)}
    torch.save({"shared.weight": torch.zeros(3, 2)}, tmp_path / "pytorch_model.bin")
    assert torch.equal(read_weights(tmp_path)["shared.weight"], torch.zeros(3, 2))
    save_file(tensors, str(tmp_path / "model.safetensors"))
    assert torch.equal(read_weights(tmp_path)["shared.weight"], tensors["shared.weight"])


def test_read_weights_refusals(tmp_path):
    assert refusal(read_weights, tmp_path) == (
        f"{tmp_path}: neither model.safetensors nor pytorch_model.bin")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not a pickle")
    assert refusal(read_weights, tmp_path) == f"{tmp_path / 'pytorch_model.bin'}: unreadable (UnpicklingError)"
    torch.save({"shared.weight": Path("x")}, tmp_path / "pytorch_model.bin")  # not only tensors
    assert refusal(read_weights, tmp_path) == f"{tmp_path / 'pytorch_model.bin'}: unreadable (UnpicklingError)"
    torch.save([torch.zeros(1)], tmp_path / "pytorch_model.bin")
    assert refusal(read_weights, tmp_path) == f"{tmp_path / 'pytorch_model.bin'}: not a state dict"
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert refusal(read_weights, tmp_path) == (
        f"{tmp_path / 'model.safetensors'}: unreadable (Error while deserializing header: "
        "header too small)")


def hf_state(config: ModelConfig, vocab: int, *, prefix: str = "", bias: bool = True,
             lm_head: bool = False) -> dict[str, torch.Tensor]:
    """A MarianMTModel state dict by name and shape (random values), for ``config``."""
    g = torch.Generator().manual_seed(0)
    d, f = config.d_model, config.d_ff
    out = {f"{prefix}shared.weight": torch.randn(vocab, d, generator=g)}

    def add(name, *shape):
        out[f"{prefix}{name}"] = torch.randn(*shape, generator=g)

    def linear(name, rows, cols):
        add(f"{name}.weight", rows, cols)
        add(f"{name}.bias", rows)

    def norm(name):
        add(f"{name}.weight", d)
        add(f"{name}.bias", d)

    for side, count in (("encoder", config.num_encoder_layers), ("decoder", config.num_decoder_layers)):
        for i in range(count):
            layer = f"{side}.layers.{i}"
            attentions = ["self_attn"] + (["encoder_attn"] if side == "decoder" else [])
            for attn in attentions:
                for p in "qkvo":
                    linear(f"{layer}.{attn}.{'out' if p == 'o' else p}_proj", d, d)
                norm(f"{layer}.{attn}_layer_norm")
            linear(f"{layer}.fc1", f, d)
            linear(f"{layer}.fc2", d, f)
            norm(f"{layer}.final_layer_norm")
    if bias:
        add("final_logits_bias", 1, vocab)
    if lm_head:
        out["lm_head.weight"] = torch.randn(vocab, d, generator=g)
    return out


ORDER = [4, 1, 4, 0, 2, 3]  # VOCAB's, as vocabulary_order gives it


def test_an_untied_output_layer_takes_lm_head_and_the_bias_in_our_order():
    config = model_config({**BASE, "tie_word_embeddings": False}, PATH, len(ORDER))
    state = hf_state(config, len(VOCAB), prefix="model.", lm_head=True)
    out = convert_state(state, config, ORDER, Path("opus"))
    index = torch.tensor(ORDER)
    assert torch.equal(out["output_projection.weight"], state["lm_head.weight"][index])
    assert torch.equal(out["src_embed.token.weight"], state["model.shared.weight"][index])
    bias = state["model.final_logits_bias"].reshape(-1)[index]
    assert torch.equal(out["output_projection.bias"][[0, 1, 3, 4, 5]], bias[[0, 1, 3, 4, 5]])
    assert out["output_projection.bias"][2] == NEVER  # Marian's pad row, used twice
    del state["lm_head.weight"]
    assert refusal(convert_state, state, config, ORDER, Path("opus")) == (
        "opus: weight 'lm_head.weight' is missing")


def test_without_a_logits_bias_only_the_repeated_row_is_barred():
    config = model_config(BASE, PATH, len(ORDER))
    out = convert_state(hf_state(config, len(VOCAB), bias=False), config, ORDER, Path("opus"))
    assert out["output_projection.bias"].tolist() == [0.0, 0.0, NEVER, 0.0, 0.0, 0.0]
    own_start = [4, 1, 5, 0, 2, 3]  # a vocabulary with its own <s>: no row is repeated
    out = convert_state(hf_state(config, 6, bias=False), config, own_start, Path("opus"))
    assert out["output_projection.bias"].tolist() == [0.0] * 6


def test_a_missing_weight_is_named():
    config = model_config(BASE, PATH, len(ORDER))
    state = hf_state(config, len(VOCAB))
    del state["decoder.layers.0.fc2.bias"]
    assert refusal(convert_state, state, config, ORDER, Path("opus")) == (
        "opus: weight 'decoder.layers.0.fc2.bias' is missing")


def marian_files(directory: Path, config: dict, vocab: dict, state: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "vocab.json").write_text(json.dumps(vocab))
    if state is not None:
        save_file(state, str(directory / "model.safetensors"))
    return directory


def test_import_refusals_before_the_weights(tmp_path):
    assert refusal(import_marian, tmp_path / "none", tmp_path / "run") == (
        f"{tmp_path / 'none'}: not a directory")
    d = marian_files(tmp_path / "list", BASE, VOCAB)
    (d / "config.json").write_text("[1]")
    assert refusal(import_marian, d, tmp_path / "run") == f"{d / 'config.json'}: not a JSON object"
    d = marian_files(tmp_path / "strings", {**BASE, "vocab_size": 5}, {"a": "0"})
    assert refusal(import_marian, d, tmp_path / "run") == (
        f"{d / 'vocab.json'}: must map pieces to integer ids")
    d = marian_files(tmp_path / "sizes", BASE, VOCAB)
    assert refusal(import_marian, d, tmp_path / "run") == (
        f"{d / 'vocab.json'}: 5 pieces, config.json says vocab_size 10")
    assert not (tmp_path / "run").exists()


def test_weights_of_another_size_than_the_config_are_one_line(tmp_path):
    marian = {**BASE, "vocab_size": 5, "decoder_vocab_size": 5, "pad_token_id": 4,
              "eos_token_id": 0, "decoder_start_token_id": 4}
    wide = model_config({**marian, "d_model": 64}, PATH, len(ORDER))
    d = marian_files(tmp_path / "m", marian, VOCAB, hf_state(wide, 5))
    message = refusal(import_marian, d, tmp_path / "run")
    assert message.startswith(f"{d}: the weights do not fit config.json (size mismatch for ")
    assert "\n" not in message and not (tmp_path / "run").exists()
    few = model_config(marian, PATH, len(ORDER))
    state = hf_state(few, 5)
    state["shared.weight"] = state["shared.weight"][:3]  # fewer rows than vocab.json
    d = marian_files(tmp_path / "rows", marian, VOCAB, state)
    assert refusal(import_marian, d, tmp_path / "run").startswith(
        f"{d}: the weights do not fit config.json (index ")


def spm_model(words: list[str]) -> bytes:
    import io

    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(words * 20), model_writer=out,
                                   vocab_size=8, model_type="unigram", minloglevel=2)
    return out.getvalue()


MARIAN = {**BASE, "vocab_size": 5, "decoder_vocab_size": 5, "pad_token_id": 4, "eos_token_id": 0}


@pytest.fixture(scope="module")
def proto():
    return spm_model(["a b", "b a a", "ab ba", "a a b b"])


def marian_dir(root: Path, proto: bytes, *, config=None, vocab=None, state=None) -> Path:
    config = MARIAN if config is None else config
    if state is None:
        state = hf_state(model_config(config, PATH, len(ORDER)), config["vocab_size"])
    d = marian_files(root, config, VOCAB if vocab is None else vocab, state)
    (d / "source.spm").write_bytes(proto)
    (d / "target.spm").write_bytes(proto)
    return d


def test_a_hand_written_import(tmp_path, proto):
    """No decoder_start_token_id: the pad token starts the decoder, so our BOS row is its row."""
    from transformer import Transformer
    from transformer.model_dir import load_model_dir

    config = model_config(MARIAN, PATH, len(ORDER))
    state = hf_state(config, 5)
    d = marian_dir(tmp_path / "m", proto, state=state)
    run = tmp_path / "run"
    assert import_marian(d, run) == {"out": str(run), "parameters": Transformer(config).num_parameters(),
                                     "vocab_size": 6, "layers": [2, 1], "activation": "silu"}
    loaded = load_model_dir(run)
    assert loaded.record.to_dict()["training"] == {"decode_max_len_a": 1.5, "decode_max_len_b": 10}
    assert loaded.record.to_dict()["imported_from"] == {"format": "marian", "path": str(d.resolve())}
    assert loaded.src_tokenizer.append_eos and not loaded.tgt_tokenizer.append_eos
    assert torch.equal(loaded.model.tgt_embed.token.weight[2], state["shared.weight"][4])
    assert loaded.model.output_projection.bias[2] == NEVER


def test_import_refusals_name_their_file(tmp_path, proto):
    for name, missing, what in (("config.json", "the model's config.json", "config.json"),
                                ("vocab.json", "the shared vocabulary", "vocabulary")):
        d = marian_dir(tmp_path / f"no-{name}", proto)
        (d / name).unlink()
        assert refusal(import_marian, d, tmp_path / "run") == f"{d / name}: missing ({missing})"
        (d / name).write_text("{oops")
        assert refusal(import_marian, d, tmp_path / "run").startswith(f"{d / name}: unreadable {what} (")
    three = {**MARIAN, "vocab_size": 3, "decoder_vocab_size": 3, "pad_token_id": 2}
    d = marian_dir(tmp_path / "nounk", proto, config=three, vocab={"</s>": 0, "a": 1, "<pad>": 2},
                   state={})
    assert refusal(import_marian, d, tmp_path / "run") == f"{d / 'vocab.json'}: no <unk> piece"
    state = hf_state(model_config(MARIAN, PATH, len(ORDER)), 5)
    del state["shared.weight"]
    d = marian_dir(tmp_path / "noshared", proto, state=state)
    assert refusal(import_marian, d, tmp_path / "run") == f"{d}: weight 'shared.weight' is missing"
    d = marian_dir(tmp_path / "badspm", proto)
    (d / "target.spm").write_bytes(b"not a model")
    assert refusal(import_marian, d, tmp_path / "run").startswith(
        f"{d / 'target.spm'}: not a SentencePiece model (")
    (d / "source.spm").unlink()
    assert refusal(import_marian, d, tmp_path / "run") == f"{d / 'source.spm'}: missing or unreadable"
    assert not (tmp_path / "run").exists()


def test_a_decoder_start_token_of_its_own_is_our_bos_row(tmp_path, proto):
    from transformer.model_dir import load_model_dir

    own = {**MARIAN, "vocab_size": 6, "decoder_vocab_size": 6, "decoder_start_token_id": 5}
    config = model_config(own, PATH, len(ORDER))
    state = hf_state(config, 6)
    d = marian_dir(tmp_path / "m", proto, config=own, vocab={**VOCAB, "<s>": 5}, state=state)
    import_marian(d, tmp_path / "run")
    model = load_model_dir(tmp_path / "run").model
    assert torch.equal(model.tgt_embed.token.weight[2], state["shared.weight"][5])
    assert model.output_projection.bias[2] == state["final_logits_bias"].reshape(-1)[5]


def contents(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path, with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_import_refuses_a_directory_holding_something_unless_told_to_overwrite(tmp_path, proto):
    """The guard is the library's (a Python call), and the command line passes --overwrite."""
    from transformer.cli import main
    from transformer.model_dir import load_model_dir

    first = marian_dir(tmp_path / "first", proto)
    state = hf_state(model_config(MARIAN, PATH, len(ORDER)), 5)
    state["shared.weight"] = state["shared.weight"] + 1.0
    second = marian_dir(tmp_path / "second", proto, state=state)
    run = tmp_path / "run"
    import_marian(first, run)
    before = contents(run)
    assert refusal(import_marian, second, run) == (
        f"{run} already holds a model; pass --overwrite to replace it")
    assert contents(run) == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert refusal(import_marian, second, other) == (
        f"{other}: exists and is not an empty directory; pass --overwrite to write the model into it")
    assert contents(other) == {"notes.txt": b"mine"}
    (tmp_path / "empty").mkdir()
    import_marian(first, tmp_path / "empty")  # an empty directory is a new one

    import_marian(second, run, overwrite=True)
    loaded = load_model_dir(run)
    assert loaded.record.imported_from["path"] == str(second.resolve())
    assert torch.equal(loaded.model.tgt_embed.token.weight[2], state["shared.weight"][4])

    before = contents(run)
    assert main(["import", "marian", str(first), "--out", str(run)]) == 2
    assert contents(run) == before
    assert main(["import", "marian", str(first), "--out", str(run), "--overwrite"]) == 0
    weights = load_model_dir(run).model.state_dict()  # the first model's again
    for name, tensor in load_model_dir(tmp_path / "empty").model.state_dict().items():
        assert torch.equal(weights[name], tensor), name
