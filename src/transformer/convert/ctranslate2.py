"""Our model -> a CTranslate2 model directory, through CTranslate2's own ``TransformerSpec``.

CTranslate2 (the fastest CPU engine for this architecture, with int8) describes a Transformer by
a spec whose fields are filled with numpy arrays; ``spec.save`` then writes ``model.bin`` and the
vocabularies. The mapping from our modules:

| ours                                       | CTranslate2 spec                                 |
| ------------------------------------------ | ------------------------------------------------ |
| ``src_embed.token.weight`` (x sqrt(D))     | ``encoder.embeddings[0].weight``, ``scale_embeddings`` |
| the sinusoidal (or learned) position table | ``{encoder,decoder}.position_encodings.encodings`` |
| self-attention ``qkv_proj`` / ``out_proj`` | ``self_attention.linear[0]`` / ``linear[2]``     |
| cross-attention ``q_proj``, ``kv_proj``    | ``attention.linear[0]``, ``linear[1]``           |
| ``norm1/2/3`` (post-LN: after each residual; pre-LN: before each sub-layer) | the sub-layers' ``layer_norm`` |
| ``feed_forward.linear1/linear2``           | ``ffn.linear_0`` / ``linear_1``                  |
| ``output_projection``                      | ``decoder.projection``                           |

The position table is written out, not left to CTranslate2: its built-in table puts all sines
before all cosines, while the paper interleaves them (section 3.5).

An int8 model is only as exact as the int8 GEMM that decodes it: see :func:`int8_decoding_caveat`.
Where that GEMM is oneDNN's u8s8 kernel without VNNI (an AVX2 CPU), the sum of two products of an
activation (0-255) and a weight (up to 127) can pass the 16 bits it is held in, and saturates;
weights stored up to 63 (``int8_max=63``: 7 bits) keep every such sum inside (2 x 255 x 63 =
32,130), at the cost of one bit of weight precision, and at the same speed.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer.errors import InputError
from transformer.hardware import VNNI_FLAGS, cpu_flags
from transformer.model_dir.output import write_new_dir

# PyTorch, numpy and our model where a model is converted: a conversion already cached needs none
if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch import nn

    from transformer.config import ModelConfig
    from transformer.model.transformer import Transformer

# our activation name -> CTranslate2's Activation member name
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH"}
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16",
                 "int8_bfloat16")
# ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) values that leave oneDNN without VNNI instructions
ONEDNN_ISAS_WITHOUT_VNNI = ("SSE41", "AVX", "AVX2", "AVX512_CORE")
# MKL_ENABLE_INSTRUCTIONS values that leave MKL without VNNI (AVX2_E1 and AVX512_E1 on have it)
MKL_ISAS_WITHOUT_VNNI = ("SSE4_2", "AVX", "AVX2", "AVX512")
INT8_CAVEAT = ("int8 CTranslate2 models decoded on this CPU lose accuracy: CTranslate2's default "
               "int8 GEMM here, oneDNN's u8s8 kernel, saturates without VNNI; export with "
               "--int8-max 63 (7-bit weights) or set CT2_USE_MKL=1 when decoding to avoid it")
# the largest int8 weight of a model decoded where oneDNN's int8 GEMM saturates (module docstring)
UNSATURATED_INT8_MAX = 63


def _cpu_vendor() -> str:
    """The x86 vendor string of /proc/cpuinfo ("GenuineIntel", "AuthenticAMD"), or ""."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id":
                return value.strip()
    except OSError:
        pass
    return ""


def onednn_int8_saturates(environ: Mapping[str, str] | None = None) -> bool:
    """Whether CTranslate2, decoding an int8 model on this CPU under ``environ`` (default: this
    process's), runs oneDNN's u8s8 GEMM without VNNI, whose 16-bit pair sums saturate.

    CTranslate2 uses Intel MKL on GenuineIntel CPUs and oneDNN elsewhere unless ``CT2_USE_MKL``
    says otherwise; oneDNN picks its kernel from the CPU's flags, capped by ``ONEDNN_MAX_CPU_ISA``.
    MKL saturates the same way on an Intel CPU where it runs without VNNI, capped by
    ``MKL_ENABLE_INSTRUCTIONS`` (measured on an AVX512-VNNI Xeon: AVX2 or AVX512 saturate, the
    uncapped kernel does not), and not on AMD (measured at AVX2 on an EPYC).
    ``CT2_FORCE_CPU_ISA`` does not count: it selects CTranslate2's own kernels, not oneDNN's
    (forcing AVX2 on an AVX512-VNNI machine leaves the int8 error as it was). A CPU this cannot
    read (no /proc/cpuinfo) counts as fine.
    """
    env = os.environ if environ is None else environ
    vendor = _cpu_vendor()
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86") or not vendor:
        return False
    use_mkl = env.get("CT2_USE_MKL", "").strip().lower()
    if use_mkl in ("1", "true", "yes", "on") or (not use_mkl and vendor == "GenuineIntel"):
        if vendor != "GenuineIntel":
            return False  # MKL elsewhere does not saturate (measured at AVX2 on an AMD EPYC)
        cap = env.get("MKL_ENABLE_INSTRUCTIONS", "").strip().upper()
        without_vnni = MKL_ISAS_WITHOUT_VNNI
    else:
        cap = (env.get("ONEDNN_MAX_CPU_ISA") or env.get("DNNL_MAX_CPU_ISA") or "").strip().upper()
        without_vnni = ONEDNN_ISAS_WITHOUT_VNNI
    return cap in without_vnni or not any(f in cpu_flags() for f in VNNI_FLAGS)


def int8_max_for_this_cpu() -> int:
    """The largest int8 weight to store for CTranslate2 decoding on this CPU: 63 where its int8
    GEMM saturates (:func:`onednn_int8_saturates`; see the module's docstring), else 127."""
    return UNSATURATED_INT8_MAX if onednn_int8_saturates() else 127


def int8_decoding_caveat(quantization: str | None, int8_max: int = 127) -> str | None:
    """One line on why an export quantized as ``quantization`` (int8 weights up to ``int8_max``)
    decodes less exactly on this CPU than its int8 rounding alone explains
    (:func:`onednn_int8_saturates`), or None."""
    if quantization is None or not quantization.startswith("int8") or int8_max <= UNSATURATED_INT8_MAX:
        return None
    return INT8_CAVEAT if onednn_int8_saturates() else None


def _require_ctranslate2() -> Any:
    try:
        import ctranslate2
    except ImportError:  # pragma: no cover - the convert extra installs it
        raise InputError("CTranslate2 is not installed: pip install 'transformer[convert]'") from None
    return ctranslate2


def _array(tensor: torch.Tensor) -> np.ndarray:
    import torch

    return tensor.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy().copy()


def _linear(spec: Any, module: nn.Linear) -> None:
    spec.weight = _array(module.weight)
    if module.bias is not None:
        spec.bias = _array(module.bias)


def _norm(spec: Any, module: nn.LayerNorm) -> None:
    spec.gamma = _array(module.weight)
    spec.beta = _array(module.bias)


def _positions(embeddings: nn.Module) -> np.ndarray:
    """The (max_len, D) table our embedding adds: the sinusoidal buffer or learned weights."""
    position = embeddings.position
    return _array(position.table if hasattr(position, "table") else position.embedding.weight)


def _layer(spec: Any, layer: nn.Module, *, cross: bool) -> None:
    """One encoder (``cross=False``) or decoder layer's weights."""
    _linear(spec.self_attention.linear[0], layer.self_attn.qkv_proj)
    _linear(spec.self_attention.linear[1], layer.self_attn.out_proj)
    _norm(spec.self_attention.layer_norm, layer.norm1)
    ffn_norm = layer.norm2
    if cross:
        _linear(spec.attention.linear[0], layer.cross_attn.q_proj)
        _linear(spec.attention.linear[1], layer.cross_attn.kv_proj)
        _linear(spec.attention.linear[2], layer.cross_attn.out_proj)
        _norm(spec.attention.layer_norm, layer.norm2)
        ffn_norm = layer.norm3
    _norm(spec.ffn.layer_norm, ffn_norm)
    _linear(spec.ffn.linear_0, layer.feed_forward.linear1)
    _linear(spec.ffn.linear_1, layer.feed_forward.linear2)


def _check_exportable(config: ModelConfig) -> None:
    activation = config.activation
    if activation not in ACTIVATIONS:
        raise InputError(f"activation {activation!r} has no CTranslate2 equivalent "
                         f"(supported: {', '.join(ACTIVATIONS)})")


def ctranslate2_spec(model: Transformer, *, source_vocabulary: Sequence[str],
                     target_vocabulary: Sequence[str]) -> Any:
    """The ``ctranslate2.specs.TransformerSpec`` of ``model`` (weights copied as float32).

    ``source_vocabulary``/``target_vocabulary`` are the pieces of ids 0..V-1 (their sizes must be
    the model's); the special pieces must be ``<unk>``, ``<s>`` and ``</s>`` as in our tokenizers.
    """
    _require_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec

    from transformer.model.transformer import Transformer

    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a Transformer, got {type(model).__name__}")
    _check_exportable(model.config)
    config = model.config
    for side, vocabulary, size in (("source", source_vocabulary, config.src_vocab_size),
                                   ("target", target_vocabulary, config.tgt_vocab_size)):
        if len(vocabulary) != size:
            raise InputError(f"the {side} vocabulary has {len(vocabulary)} pieces but the model "
                             f"has {size} embeddings")
    spec = transformer_spec.TransformerSpec.from_config(
        (config.num_encoder_layers, config.num_decoder_layers),
        config.num_heads,
        pre_norm=config.norm_first,
        activation=getattr(common_spec.Activation, ACTIVATIONS[config.activation]),
    )
    encoder, decoder = spec.encoder, spec.decoder
    encoder.embeddings[0].weight = _array(model.src_embed.token.weight)
    decoder.embeddings.weight = _array(model.tgt_embed.token.weight)
    encoder.scale_embeddings = decoder.scale_embeddings = True  # x sqrt(d_model), section 3.4
    encoder.position_encodings.encodings = _positions(model.src_embed)
    decoder.position_encodings.encodings = _positions(model.tgt_embed)
    for layer_spec, layer in zip(encoder.layer, model.encoder.layers, strict=True):
        _layer(layer_spec, layer, cross=False)
    for layer_spec, layer in zip(decoder.layer, model.decoder.layers, strict=True):
        _layer(layer_spec, layer, cross=True)
    if config.norm_first:  # pre-LN ends each stack with a LayerNorm
        _norm(encoder.layer_norm, model.encoder.norm)
        _norm(decoder.layer_norm, model.decoder.norm)
    _linear(decoder.projection, model.output_projection)
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    spec.register_source_vocabulary(list(source_vocabulary))
    spec.register_target_vocabulary(list(target_vocabulary))
    return spec


def save_ctranslate2(model: Transformer, out_dir: str | os.PathLike[str], *,
                     source_vocabulary: Sequence[str], target_vocabulary: Sequence[str],
                     quantization: str | None = None, add_source_eos: bool = False,
                     overwrite: bool = False, int8_max: int = 127) -> Path:
    """Write ``model`` as a CTranslate2 directory (``model.bin``, ``config.json``, vocabularies)
    that ``ctranslate2.Translator(out_dir)`` loads; ``quantization`` (e.g. ``"int8"``) is applied
    to the weights as CTranslate2's converters do (an int8 weight row scaled so that its largest
    magnitude is ``int8_max``: 63 for a CPU without VNNI, see the module's docstring; 127, the
    default, is CTranslate2's own quantization); ``add_source_eos`` makes CTranslate2 end each
    source with ``</s>`` (a model imported from Marian). The directory is written beside and
    renamed into place, so a failure leaves no half-written model. ``out_dir`` must be new or
    empty (InputError naming it, nothing written) unless ``overwrite``: then its content is
    replaced. Returns ``out_dir`` as a Path."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise InputError(f"unknown quantization {quantization!r}; choose from "
                         f"{', '.join(QUANTIZATIONS)}")
    spec = ctranslate2_spec(model, source_vocabulary=source_vocabulary,
                            target_vocabulary=target_vocabulary)
    spec.config.add_source_eos = add_source_eos
    if isinstance(int8_max, bool) or not isinstance(int8_max, int) or not 1 <= int8_max <= 127:
        raise InputError(f"int8_max must be an integer from 1 to 127, got {int8_max!r}")
    spec.validate()
    if quantization is not None and quantization.startswith("int8") and int8_max != 127:
        spec._alias_variables()  # what optimize() does first
        _quantize_int8(spec, int8_max=int8_max, quantization=quantization)
    else:
        spec.optimize(quantization=quantization)
    return write_new_dir(out_dir, lambda tmp: spec.save(str(tmp)), overwrite=overwrite)


def _quantize_int8(spec: Any, *, int8_max: int, quantization: str) -> None:
    """CTranslate2's int8 quantization of ``spec`` (per output row, round to nearest), each row
    scaled to ``int8_max`` instead of 127; the variables left in floating point are cast as
    ``spec.optimize(quantization)`` casts them."""
    import numpy as np
    from ctranslate2.specs import model_spec

    cast = {"int8_float16": "float16", "int8_bfloat16": "bfloat16"}.get(quantization, "float32")

    def visit(layer: Any, name: str, value: Any) -> None:
        if not isinstance(value, model_spec.Variable) or value.is_scalar():
            return
        key = model_spec._split_scope(name)[-1]
        if not hasattr(layer, f"{key}_scale"):  # not a quantized weight
            if value.dtype in ("float32", "float16", "bfloat16"):
                setattr(layer, key, value.to(cast))
            return
        weight = value.to("float32").numpy().reshape(value.shape[0], -1).copy()
        largest = np.abs(weight).max(axis=1)
        largest[largest == 0] = int8_max
        scale = (int8_max / np.maximum(largest, np.float32(int8_max) / np.finfo(np.float32).max))
        scale = scale.astype(np.float32)
        stored = np.rint(weight * scale[:, None]).astype(np.int8).reshape(value.shape)
        setattr(layer, key, model_spec.NumpyVariable(stored))
        setattr(layer, f"{key}_scale", model_spec.NumpyVariable(scale))

    model_spec.visit_spec(spec, visit)


def vocabulary(tokenizer: Any) -> list[str]:
    """The pieces of a tokenizer's ids 0..V-1."""
    return [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]


def export_ctranslate2(run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                       quantization: str | None = None, overwrite: bool = False,
                       int8_max: int = 127) -> Path:
    """Export a translation model directory (ours) to a CTranslate2 directory ``out_dir``, new or
    empty unless ``overwrite`` (see :func:`save_ctranslate2`, and ``int8_max`` there); returns it
    as a Path."""
    from transformer.model.transformer import Transformer
    from transformer.model_dir import load_model_dir

    loaded = load_model_dir(run_dir)
    if not isinstance(loaded.model, Transformer):
        raise InputError(f"{run_dir}: is a {type(loaded.model).__name__}, not a translation model")
    return save_ctranslate2(loaded.model, out_dir,
                            source_vocabulary=vocabulary(loaded.src_tokenizer),
                            target_vocabulary=vocabulary(loaded.tgt_tokenizer),
                            quantization=quantization,
                            add_source_eos=getattr(loaded.src_tokenizer, "append_eos", False),
                            overwrite=overwrite, int8_max=int8_max)


# bumped whenever the mapping above changes, so that every cached conversion is made again
EXPORT_FORMAT = 1
# our inference precision -> the quantization a cached conversion is written with
CACHE_QUANTIZATIONS = {"fp32": None, "int8": "int8", "bf16": "bfloat16"}


def cached_ctranslate2(loaded: Any, *, precision: str) -> Path:
    """The CTranslate2 directory of a loaded translation model directory (a
    :class:`~transformer.model_dir.LoadedModel`) for ``precision`` (fp32, int8, bf16), converted
    on first use into ``RUN_DIR/.cache/ctranslate2-<precision>/`` (int8 where CTranslate2's int8
    GEMM saturates: ``ctranslate2-int8-7bit/``, weights up to 63) and reused while the weights'
    SHA-256, the run's config and tokenizers, CTranslate2's version and this exporter are
    unchanged (:func:`transformer.model_dir.cache.cached_dir`: atomic; a read-only run directory
    caches under the user's cache folder). InputError for a model CTranslate2 cannot hold."""
    from transformer.model_dir.cache import cached_dir, inputs_sha256, weights_sha256

    ctranslate2 = _require_ctranslate2()
    if precision not in CACHE_QUANTIZATIONS:
        raise InputError(f"CTranslate2 has no precision {precision!r}; choose from "
                         f"{', '.join(CACHE_QUANTIZATIONS)}")
    run_dir = Path(loaded.record.source).parent
    if not loaded.record.is_translation:  # the model is read only to convert it
        raise InputError(f"{run_dir}: is a classifier, not a translation model")
    _check_exportable(loaded.config)
    # where CTranslate2's int8 GEMM saturates, 7-bit weights (a folder of their own, so that
    # machines of both kinds can share a run directory)
    int8_max = int8_max_for_this_cpu() if precision == "int8" else 127
    key = {"weights_sha256": weights_sha256(run_dir), "inputs_sha256": inputs_sha256(run_dir),
           "ctranslate2": ctranslate2.__version__, "export_format": EXPORT_FORMAT,
           "quantization": CACHE_QUANTIZATIONS[precision], "int8_max": int8_max}

    def convert(tmp: Path) -> None:
        save_ctranslate2(loaded.model, tmp / "model", source_vocabulary=vocabulary(loaded.src_tokenizer),
                         target_vocabulary=vocabulary(loaded.tgt_tokenizer),
                         quantization=CACHE_QUANTIZATIONS[precision],
                         add_source_eos=getattr(loaded.src_tokenizer, "append_eos", False),
                         int8_max=int8_max)

    name = f"ctranslate2-{precision}" + ("-7bit" if int8_max == UNSATURATED_INT8_MAX else "")
    return cached_dir(run_dir, name, key=key, fill=convert) / "model"
