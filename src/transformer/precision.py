"""``precision="auto"``: the fastest precision this machine runs natively, chosen by what it can do
and, on a CPU, confirmed by a short probe at the model's shape.

- CUDA: bf16 where the device has it (compute capability 8.0+); else fp16 with gradient scaling
  for training and fp32 for decoding.
- CPU: bf16 only where it is native (:attr:`transformer.hardware.CpuInfo.native_bf16`) AND the
  probe (one encoder layer of the model, bf16 against fp32, under a second) finds it at least
  ``BF16_MIN_SPEEDUP`` times faster; else fp32. Without native bf16 PyTorch emulates it: 4-14x
  slower than fp32 on an AVX2 CPU.
- An explicit ``bf16`` on a CPU where the probe finds it slower is kept, with one warning that
  gives the measured ratio.

The choice is a pure function of the request, the device, the :class:`~transformer.hardware.Machine`
and the probe (a callable), so tests run it over machines this one is not.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from transformer.hardware import Machine

log = logging.getLogger(__name__)

BF16_MIN_SPEEDUP = 1.1  # bf16 must be this much faster than fp32 to be chosen (probe noise aside)
PROBE_FLOPS = 2e9  # about the work of one probe pass: tens of milliseconds on one core at d128
PROBE_SECONDS = 0.5  # no further repeats once the probe has taken this long


@dataclass(frozen=True)
class Probe:
    """One layer's step timed in fp32 and under bf16 autocast (best of a few runs each)."""

    fp32_ms: float
    bf16_ms: float
    tokens: int  # batch x length of the probe's input
    backward: bool  # forward and backward (training) or forward only (decoding)

    @property
    def speedup(self) -> float:
        """fp32 time / bf16 time: above 1 when bf16 is faster."""
        return self.fp32_ms / max(self.bf16_ms, 1e-9)

    def describe(self) -> str:
        return (f"probe: {'forward+backward' if self.backward else 'forward'} over "
                f"{self.tokens} tokens, fp32 {self.fp32_ms:.1f} ms, bf16 {self.bf16_ms:.1f} ms")


@dataclass(frozen=True)
class PrecisionChoice:
    requested: str
    precision: str  # what runs: fp32, bf16, fp16 (training), int8 (decoding)
    reason: str
    probe: Probe | None = None
    warning: str | None = None  # one line for the user: an explicit choice that is slow here
    machine: str = ""  # the kind it was chosen on (see machine_kind): a resume re-chooses elsewhere

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["probe"] = None if self.probe is None else {**asdict(self.probe),
                                                         "speedup": round(self.probe.speedup, 3)}
        return out

    def describe(self) -> str:
        """One line for the log: what runs and why."""
        return f"precision {self.precision} (asked: {self.requested}): {self.reason}"


def choose_precision(requested: str, *, device: torch.device | str, machine: Machine,
                     probe: Callable[[], Probe], training: bool) -> PrecisionChoice:
    """The precision a run on ``device`` uses for ``requested`` (auto, fp32, bf16, fp16, int8).

    ``probe`` is called only on a CPU, for ``auto`` where bf16 is native and for an explicit
    ``bf16``. ``training`` picks what CUDA without bf16 falls back to (fp16 with a scaler when
    training, fp32 when decoding).
    """
    device = torch.device(device)
    if requested != "auto" and requested != "bf16":
        return PrecisionChoice(requested, requested, "as asked")
    if device.type == "cuda":
        index = device.index or 0
        gpu = next((d for d in machine.cuda if d.index == index), None)
        if requested == "bf16":
            return PrecisionChoice(requested, "bf16", "as asked")
        if gpu is not None and gpu.bf16:
            return PrecisionChoice(requested, "bf16", f"{gpu.name} has native bf16")
        fallback = "fp16" if training else "fp32"
        name = gpu.name if gpu is not None else f"cuda:{index}"
        return PrecisionChoice(requested, fallback, f"{name} has no native bf16"
                               + (" (fp16 with gradient scaling)" if training else ""))
    if device.type != "cpu":
        return PrecisionChoice(requested, "bf16" if requested == "bf16" else "fp32",
                               f"{device.type}: no probe")
    cpu = machine.cpu
    kind = f"{cpu.model}, {cpu.capability}"
    if requested == "auto" and not cpu.native_bf16:
        return PrecisionChoice(requested, "fp32", f"this CPU has no native bf16 ({kind})")
    measured = probe()
    fast = measured.speedup >= BF16_MIN_SPEEDUP
    ratio = (f"bf16 at {measured.speedup:.2f}x fp32's speed" if measured.speedup >= 1
             else f"bf16 {1 / measured.speedup:.1f}x slower than fp32")
    if requested == "bf16":
        warning = None if fast else (
            f"--precision bf16 on this CPU ({kind}, "
            f"{'native' if cpu.native_bf16 else 'no native'} bf16): {ratio} in a probe of the "
            "model; --precision auto picks the faster")
        return PrecisionChoice(requested, "bf16", "as asked", measured, warning)
    return PrecisionChoice(requested, "bf16" if fast else "fp32",
                           f"native bf16 ({kind}) and {ratio}", measured)


def probe_layer(layer: nn.Module, *, d_model: int, d_ff: int, backward: bool, max_len: int,
                repeats: int = 3, clock: Callable[[], float] = time.perf_counter) -> Probe:
    """Time a copy of ``layer`` (an encoder layer: ``layer(x) -> (y, weights)``) on random input of
    the model's width, fp32 against bf16 autocast, alternating, best of ``repeats`` each.

    The input holds about ``PROBE_FLOPS`` of work (256 to 4096 tokens, in sentences of up to 32);
    repeats stop once ``PROBE_SECONDS`` have passed, so a probe takes about 0.1 s at d_model 128
    and about a second at the paper's base on one core.
    """
    layer = copy.deepcopy(layer).float().train(backward)
    per_token = 2 * d_model * (4 * d_model + 2 * d_ff) * (3 if backward else 1)
    tokens = int(min(4096, max(256, PROBE_FLOPS // per_token)))
    length = max(1, min(32, max_len, tokens))
    x = torch.randn(max(1, tokens // length), length, d_model)

    def run(bf16: bool) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if backward:
                y = layer(x.requires_grad_())[0]
            else:
                with torch.no_grad():
                    y = layer(x)[0]
        if backward:
            y.float().sum().backward()

    fp32_ms, bf16_ms = _best_alternating(lambda: run(False), lambda: run(True), repeats=repeats,
                                         clock=clock)
    layer.zero_grad(set_to_none=True)
    return Probe(fp32_ms=fp32_ms, bf16_ms=bf16_ms, tokens=x.shape[0] * length, backward=backward)


def _best_alternating(fp32: Callable[[], None], bf16: Callable[[], None], *, repeats: int,
                      clock: Callable[[], float]) -> tuple[float, float]:
    """The best of up to ``repeats`` alternating runs of each, in ms, after one warm-up run each
    (first calls build kernels and caches); no further pair once ``PROBE_SECONDS`` have passed."""

    def timed(run: Callable[[], None]) -> float:
        start = clock()
        run()
        return (clock() - start) * 1e3

    begin = clock()
    timed(fp32), timed(bf16)
    high: list[float] = []
    low: list[float] = []
    while len(high) < repeats and (not high or clock() - begin < PROBE_SECONDS):
        high.append(timed(fp32))
        low.append(timed(bf16))
    return min(high), min(low)


def probe_decoding(model: nn.Module, *, sentences: int = 16, length: int = 16, steps: int = 8,
                   repeats: int = 3, clock: Callable[[], float] = time.perf_counter) -> Probe:
    """Time greedy decoding of ``model`` (a Transformer, in fp32) against a bf16 copy of it:
    ``sentences`` random sources of ``length`` tokens, ``steps`` cached steps, best of
    ``repeats``. Decoding is many small products, where bf16 gains far less than in training
    (on a Zen 4 it loses at d_model 128 and wins at 512), so it is probed as it runs."""
    from transformer.decoding import greedy_decode
    from transformer.decoding.fast_decoder import decoder_for

    config = model.config
    low = copy.deepcopy(model).to(torch.bfloat16).eval()
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, config.src_vocab_size, (sentences, length), generator=generator)

    def run(m: nn.Module, decoder: Any) -> None:
        greedy_decode(m, src, bos_id=1, eos_id=2, max_len=steps, min_len=steps,  # all steps
                      decoder=decoder)

    was_training = model.training
    model.eval()
    try:
        # the decoders are made once, as a translator makes them (weights packed once)
        high_decoder, low_decoder = decoder_for(model), decoder_for(low)
        fp32_ms, bf16_ms = _best_alternating(lambda: run(model, high_decoder),
                                             lambda: run(low, low_decoder), repeats=repeats,
                                             clock=clock)
    finally:
        model.train(was_training)
    return Probe(fp32_ms=fp32_ms, bf16_ms=bf16_ms, tokens=sentences * steps, backward=False)


def precision_for_model(requested: str, *, model: nn.Module, device: torch.device | str,
                        training: bool, machine: Machine | None = None,
                        previous: Mapping[str, Any] | None = None) -> PrecisionChoice:
    """:func:`choose_precision` for ``model`` on ``device``, on this machine unless ``machine`` is
    given. The probe: training, or a classifier, runs its first encoder layer; decoding with a
    Transformer times greedy decoding itself.

    ``previous`` (a :meth:`PrecisionChoice.to_dict` stored when a run started): a resumed ``auto``
    run on the same kind of machine keeps the precision it started with, so a resume repeats the
    same arithmetic rather than a new probe's verdict; on another kind it is chosen anew."""
    from transformer.hardware import detect

    device = torch.device(device)
    machine = machine or detect()
    kind = machine_kind(machine, device)
    if (requested == "auto" and previous and previous.get("requested") == "auto"
            and previous.get("machine") == kind
            and previous.get("precision") in ("fp32", "bf16", "fp16")):
        return PrecisionChoice(requested, previous["precision"],
                               f"as chosen when the run started ({previous.get('reason', '')})",
                               machine=kind)
    config = model.config

    def probe() -> Probe:
        with torch.random.fork_rng(devices=[]):  # the run's random streams are left untouched
            if not training and hasattr(model, "decode"):
                return probe_decoding(model)
            return probe_layer(model.encoder.layers[0], d_model=config.d_model, d_ff=config.d_ff,
                               backward=training, max_len=config.max_len)

    choice = choose_precision(requested, device=device, machine=machine, probe=probe,
                              training=training)
    return dataclasses.replace(choice, machine=kind)


def machine_kind(machine: Machine, device: torch.device) -> str:
    """What a precision choice depends on: the GPU's name, or the CPU's model and capability."""
    if device.type == "cuda":
        gpu = next((d for d in machine.cuda if d.index == (device.index or 0)), None)
        return gpu.name if gpu is not None else "cuda"
    return f"{machine.cpu.model}, {machine.cpu.capability}"


def for_inference(model: nn.Module, requested: str) -> PrecisionChoice:
    """Resolve ``requested`` (auto, fp32, bf16, int8) for decoding or classifying with ``model``
    on its device, log the choice (a warning for an explicit bf16 that is slow here) and cast the
    weights to bf16 when that is the choice. int8 keeps the float32 weights (a translator's
    decoder quantizes its own; a classifier runs in float32)."""
    device = next(model.parameters()).device
    choice = precision_for_model(requested, model=model, device=device, training=False)
    if choice.warning:
        log.warning(choice.warning)
    elif requested == "auto":
        log.info("%s%s", choice.describe(),
                 f"; {choice.probe.describe()}" if choice.probe is not None else "")
    if choice.precision == "bf16":
        model.to(torch.bfloat16)
    return choice
