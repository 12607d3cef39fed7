"""A Hugging Face MarianMT (OPUS-MT) directory -> our model directory.

Marian models are the paper's post-LN Transformer with a few variations, each of which maps onto
an option of ours:

| Marian                                        | ours                                            |
| --------------------------------------------- | ----------------------------------------------- |
| sinusoids laid out as all sines, then cosines | ``ModelConfig.positional_layout="halves"``      |
| ``activation_function="swish"``               | ``activation="silu"``                           |
| ``final_logits_bias``                         | the bias of ``output_projection``               |
| ``source.spm``/``target.spm`` + ``vocab.json``| two :class:`VocabTokenizer` over one vocabulary |
| the source ends with ``</s>``                 | the source tokenizer's ``append_eos``           |
| the decoder starts with the pad token         | our BOS row holds Marian's start-token row       |

Our special ids come first (PAD 0, UNK 1, BOS 2, EOS 3) and Marian's other pieces follow in
Marian's order. Marian has no BOS: it starts the decoder with its pad token, whose embedding we
copy into both our PAD row (masked out wherever it pads) and our BOS row (the decoder's first
input). The BOS row of the output layer gets a bias of -1e9 so that it is never predicted and
adds nothing to the softmax: every other token's logit and log-probability are Marian's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from transformer.config import ModelConfig
from transformer.config.decoding import MAX_LEN_A, MAX_LEN_B
from transformer.data.text_files import read_json
from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, SPECIAL_PIECES, UNK_ID
from transformer.data.vocab_tokenizer import VocabTokenizer
from transformer.errors import InputError, first_line, last_line
from transformer.model.transformer import Transformer

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}
NEVER = -1e9  # the logit bias of our BOS row: exp(NEVER - anything reasonable) == 0 in float32


def _field(config: dict, name: str, kind: type, path: Path) -> Any:
    value = config.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InputError(f"{path}: field {name!r} must be {kind.__name__}, got {value!r}")
    return value


def model_config(config: dict, path: Path, vocab_size: int) -> ModelConfig:
    """Our ModelConfig for a MarianConfig dict; InputError naming what we do not support."""
    def need(condition: bool, what: str) -> None:
        if not condition:
            raise InputError(f"{path}: {what} is not supported")

    need(config.get("model_type") == "marian", f"model_type {config.get('model_type')!r} (want marian)")
    heads = _field(config, "encoder_attention_heads", int, path)
    need(config.get("decoder_attention_heads") == heads, "different encoder and decoder heads")
    d_ff = _field(config, "encoder_ffn_dim", int, path)
    need(config.get("decoder_ffn_dim") == d_ff, "different encoder and decoder d_ff")
    activation = config.get("activation_function", "swish")
    need(activation in ACTIVATIONS, f"activation_function {activation!r}")
    need(config.get("scale_embedding", False) is True, "scale_embedding false (we scale by sqrt(d))")
    need(not config.get("normalize_before", False), "normalize_before (pre-LN Marian)")
    need(not config.get("normalize_embedding", False), "normalize_embedding")
    need(not config.get("add_final_layer_norm", False), "add_final_layer_norm")
    need(config.get("share_encoder_decoder_embeddings", True) is True,
         "separate source and target vocabularies (share_encoder_decoder_embeddings false)")
    decoder_vocab = config.get("decoder_vocab_size") or config.get("vocab_size")
    need(decoder_vocab == config.get("vocab_size"), "a decoder vocabulary of another size")
    return ModelConfig(
        src_vocab_size=vocab_size,
        tgt_vocab_size=vocab_size,
        d_model=_field(config, "d_model", int, path),
        num_heads=heads,
        num_encoder_layers=_field(config, "encoder_layers", int, path),
        num_decoder_layers=_field(config, "decoder_layers", int, path),
        d_ff=d_ff,
        dropout=float(config.get("dropout", 0.1)),
        attention_dropout=float(config.get("attention_dropout", 0.0)),
        activation_dropout=float(config.get("activation_dropout", 0.0)),
        max_len=_field(config, "max_position_embeddings", int, path),
        pad_id=PAD_ID,
        activation=ACTIVATIONS[activation],
        positional="sinusoidal",
        positional_layout="halves",
        share_embeddings=True,
        tie_embeddings=bool(config.get("tie_word_embeddings", True)),
    )


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """``model.safetensors`` or ``pytorch_model.bin`` (loaded with ``weights_only=True``)."""
    safetensors_path = directory / "model.safetensors"
    if safetensors_path.exists():
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(safetensors_path))
        except (SafetensorError, OSError) as err:
            raise InputError(f"{safetensors_path}: unreadable ({first_line(err)})") from None
    bin_path = directory / "pytorch_model.bin"
    if not bin_path.exists():
        raise InputError(f"{directory}: neither model.safetensors nor pytorch_model.bin")
    try:
        state = torch.load(bin_path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure is a bad file
        raise InputError(f"{bin_path}: unreadable ({type(err).__name__})") from None
    if not isinstance(state, dict):
        raise InputError(f"{bin_path}: not a state dict")
    return state


def vocabulary_order(marian_vocab: dict[str, int], *, pad_id: int, eos_id: int, start_id: int,
                     path: Path) -> tuple[list[str], list[int]]:
    """(our vocabulary, Marian's id for each of our ids). Our BOS takes the row of Marian's
    decoder start token: its pad token (then the row is used twice), or its own ``<s>``."""
    by_id = sorted(marian_vocab.items(), key=lambda item: item[1])
    ids = [i for _, i in by_id]
    if ids != list(range(len(ids))):
        raise InputError(f"{path}: ids are not 0..{len(ids) - 1}")
    unk = marian_vocab.get("<unk>")
    if unk is None:
        raise InputError(f"{path}: no <unk> piece")
    for name, i in (("pad_token_id", pad_id), ("eos_token_id", eos_id),
                    ("decoder_start_token_id", start_id)):
        if not isinstance(i, int) or not 0 <= i < len(ids):
            raise InputError(f"{path.parent / 'config.json'}: {name} {i!r} is not in the vocabulary")
    specials = {pad_id, eos_id, unk, start_id}
    rest = [(piece, i) for piece, i in by_id if i not in specials]
    clash = [p for p, _ in rest if p in SPECIAL_PIECES.values()]
    if clash:
        raise InputError(f"{path}: piece {clash[0]!r} is a special piece of ours")
    ours = [SPECIAL_PIECES[k] for k in ("pad", "unk", "bos", "eos")] + [p for p, _ in rest]
    source_ids = [pad_id, unk, start_id, eos_id] + [i for _, i in rest]
    return ours, source_ids


def _take(state: dict[str, torch.Tensor], name: str, path: Path) -> torch.Tensor:
    for key in (name, f"model.{name}"):
        if key in state:
            return state[key].float()
    raise InputError(f"{path}: weight {name!r} is missing")


def convert_state(state: dict[str, torch.Tensor], config: ModelConfig, order: list[int],
                  path: Path) -> dict[str, torch.Tensor]:
    """Marian's weights (HF names) as our model's state dict."""
    index = torch.tensor(order)

    def get(name: str) -> torch.Tensor:
        return _take(state, name, path)

    def linear(ours: str, *theirs: str) -> None:
        out[f"{ours}.weight"] = torch.cat([get(f"{t}.weight") for t in theirs])
        out[f"{ours}.bias"] = torch.cat([get(f"{t}.bias") for t in theirs])

    def norm(ours: str, theirs: str) -> None:
        out[f"{ours}.weight"], out[f"{ours}.bias"] = get(f"{theirs}.weight"), get(f"{theirs}.bias")

    out: dict[str, torch.Tensor] = {}
    embedding = get("shared.weight")[index]  # (V', D): rows in our order
    out["src_embed.token.weight"] = embedding
    out["tgt_embed.token.weight"] = embedding
    # a layer as Marian names it (m) and as we do (o): the same names in both stacks, the
    # decoder's attention over the encoder output between its self-attention and feed-forward
    for stack, layers in (("encoder", config.num_encoder_layers), ("decoder", config.num_decoder_layers)):
        for i in range(layers):
            m = o = f"{stack}.layers.{i}"
            linear(f"{o}.self_attn.qkv_proj", *(f"{m}.self_attn.{p}_proj" for p in "qkv"))
            linear(f"{o}.self_attn.out_proj", f"{m}.self_attn.out_proj")
            norm(f"{o}.norm1", f"{m}.self_attn_layer_norm")
            cross = stack == "decoder"
            if cross:
                linear(f"{o}.cross_attn.q_proj", f"{m}.encoder_attn.q_proj")
                linear(f"{o}.cross_attn.kv_proj", f"{m}.encoder_attn.k_proj", f"{m}.encoder_attn.v_proj")
                linear(f"{o}.cross_attn.out_proj", f"{m}.encoder_attn.out_proj")
                norm(f"{o}.norm2", f"{m}.encoder_attn_layer_norm")
            linear(f"{o}.feed_forward.linear1", f"{m}.fc1")
            linear(f"{o}.feed_forward.linear2", f"{m}.fc2")
            norm(f"{o}.norm{3 if cross else 2}", f"{m}.final_layer_norm")
    if config.tie_embeddings:
        out["output_projection.weight"] = embedding
    else:
        lm_head = state.get("lm_head.weight")
        if lm_head is None:
            raise InputError(f"{path}: weight 'lm_head.weight' is missing")
        out["output_projection.weight"] = lm_head.float()[index]
    bias = state.get("final_logits_bias", state.get("model.final_logits_bias"))
    bias = torch.zeros(len(order)) if bias is None else bias.float().reshape(-1)[index].clone()
    if order[BOS_ID] == order[PAD_ID]:  # Marian's pad row, used twice: predict it once only
        bias[BOS_ID] = NEVER
    out["output_projection.bias"] = bias
    return out


def import_marian(directory: str | os.PathLike[str], run_dir: str | os.PathLike[str], *,
                  overwrite: bool = False) -> dict:
    """Convert a MarianMT directory into our model directory ``run_dir``; returns a summary
    (``out``, ``parameters``, ``vocab_size``, ``layers``, ``activation``).

    ``run_dir`` must be missing or empty unless ``overwrite`` (then the model's files replace
    those there): InputError naming it, before anything is read
    (:func:`transformer.model_dir.output.check_model_out`)."""
    from transformer.model_dir import load_weights, save_model_dir
    from transformer.model_dir.output import check_model_out

    run_dir = check_model_out(run_dir, overwrite=overwrite)
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    config_path = directory / "config.json"
    marian = read_json(config_path, what="config.json", missing="missing (the model's config.json)")
    if not isinstance(marian, dict):
        raise InputError(f"{config_path}: not a JSON object")
    vocab_path = directory / "vocab.json"
    vocab = read_json(vocab_path, what="vocabulary", missing="missing (the shared vocabulary)")
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise InputError(f"{vocab_path}: must map pieces to integer ids")
    if len(vocab) != marian.get("vocab_size"):
        raise InputError(f"{vocab_path}: {len(vocab)} pieces, config.json says vocab_size "
                         f"{marian.get('vocab_size')}")
    pad, eos = marian.get("pad_token_id"), marian.get("eos_token_id")
    start = marian.get("decoder_start_token_id", pad)
    vocabulary, order = vocabulary_order(vocab, pad_id=pad, eos_id=eos, start_id=start,
                                         path=vocab_path)
    config = model_config(marian, config_path, len(vocabulary))
    weights = read_weights(directory)
    model = Transformer(config)
    try:  # every tensor of ours is made (strict); one of another shape than config.json says fails
        model.load_state_dict(convert_state(weights, config, order, directory), strict=True)
    except (RuntimeError, IndexError) as err:
        raise InputError(f"{directory}: the weights do not fit config.json "
                         f"({last_line(err)})") from None  # torch's detail is its last line
    tokenizers = []
    for side, append_eos in (("source", True), ("target", False)):
        spm_path = directory / f"{side}.spm"
        try:
            proto = spm_path.read_bytes()
        except OSError:
            raise InputError(f"{spm_path}: missing or unreadable") from None
        tokenizers.append(VocabTokenizer(proto, vocabulary, append_eos=append_eos,
                                         source=str(spm_path)))
    extra = {"training": {"decode_max_len_a": MAX_LEN_A, "decode_max_len_b": MAX_LEN_B},
             "imported_from": {"format": "marian", "path": str(directory.resolve())}}
    save_model_dir(run_dir, model, config=extra, src_tokenizer=tokenizers[0],
                   tgt_tokenizer=tokenizers[1])
    load_weights(Transformer(config), run_dir / "model.safetensors")  # it reads back
    return {"out": str(run_dir), "parameters": model.num_parameters(),
            "vocab_size": len(vocabulary), "layers": [config.num_encoder_layers,
                                                      config.num_decoder_layers],
            "activation": config.activation}


__all__ = ["UNK_ID", "EOS_ID", "import_marian", "model_config", "vocabulary_order"]
