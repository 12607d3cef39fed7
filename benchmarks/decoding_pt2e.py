"""PT2E int8 of the cached decoder step: ``torch.export``, ``prepare_pt2e``/``convert_pt2e`` with
``X86InductorQuantizer`` (torchao; PyTorch 2.13 no longer ships ``torch.ao.quantization.
quantize_pt2e``), then ``torch.compile`` with Inductor's freezing, which lowers the quantized
linear layers to oneDNN's int8 kernels (VNNI where the CPU has it).

One step of the decoding benchmark's export module (``decoding_compiled.CompiledStep``: embedding,
every layer over a fixed-size key/value cache, output projection) on random weights, timed against
the same step eager in float32, compiled in float32, and eager with today's dynamic int8
(``quantize_dynamic`` of its linear layers). Static shapes: a 32-token cache, 24 source tokens.
Reported: milliseconds a step (best of 3 rounds), compile seconds, and the int8 logits' largest
error relative to float32's largest logit (with the share of rows whose argmax agrees). A step's
time excludes the search around it, so compare it with CTranslate2's per-step time (its tokens/s
in ``benchmarks/decoding.py``, divided by the rows) with that in mind.

    pip install 'transformer[bench]'      # torchao is in the bench extra
    taskset -c 1 python benchmarks/decoding_pt2e.py

Prints a table and writes benchmarks/results/decoding_pt2e.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SHAPES = {"d256 3+3": dict(d_model=256, heads=4, layers=3, d_ff=1024),
          "d128 4+4 (multi30k-cpu)": dict(d_model=128, heads=4, layers=4, d_ff=256)}


def _require_torchao():
    try:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer
    except ImportError:
        raise SystemExit("benchmarks/decoding_pt2e.py needs torchao: pip install 'transformer[bench]'") from None
    return prepare_pt2e, convert_pt2e, x86_inductor_quantizer


def _best_ms(step, example: tuple, *, calls: int) -> float:
    with torch.no_grad():
        for _ in range(10):
            step(*example)
        best = float("inf")
        for _ in range(3):
            began = time.perf_counter()
            for _ in range(calls):
                step(*example)
            best = min(best, (time.perf_counter() - began) / calls)
    return best * 1e3


def one_row(shape: dict, *, rows: int, static: bool, calls: int) -> dict:
    """The four steps of one shape and row count, timed, with the int8 steps' errors."""
    import torch._inductor.config as inductor

    from decoding_common import build_models
    from decoding_compiled import CompiledStep

    prepare_pt2e, convert_pt2e, xiq = _require_torchao()
    inductor.freezing = True
    model, _ = build_models(vocab=8000, hf=False, **shape)
    config = model.config
    layers, heads = config.num_decoder_layers, config.num_heads
    dh = config.d_model // heads
    torch.manual_seed(0)
    cache = [torch.randn(layers, rows, heads, n, dh) for n in (32, 32, 24, 24)]
    example = (torch.randint(4, 8000, (rows,)), torch.tensor(7), *cache,
               torch.ones(rows, 24, dtype=torch.bool))
    step = CompiledStep(model.eval()).eval()
    with torch.no_grad():
        reference = step(*example)[0]
        began = time.perf_counter()
        fp32 = torch.compile(step)
        fp32(*example)
        fp32_s = time.perf_counter() - began
        began = time.perf_counter()
        quantizer = xiq.X86InductorQuantizer().set_global(
            xiq.get_default_x86_inductor_quantization_config(is_dynamic=not static))
        prepared = prepare_pt2e(torch.export.export(step, example).module(), quantizer)
        for _ in range(8):  # calibration (static) / a first pass through the observers (dynamic)
            prepared(*example)
        int8 = torch.compile(convert_pt2e(prepared))
        pt2e_logits = int8(*example)[0]
        int8_s = time.perf_counter() - began
        dynamic = torch.ao.quantization.quantize_dynamic(CompiledStep(model).eval(), {torch.nn.Linear},
                                                         dtype=torch.qint8)
        dynamic_logits = dynamic(*example)[0]

    def error(logits: torch.Tensor) -> dict:
        return {"max_rel_error": round(((logits - reference).abs().max() / reference.abs().max()).item(), 4),
                "argmax_agree": round((logits.argmax(-1) == reference.argmax(-1)).float().mean().item(), 3)}

    ms = {"eager fp32": _best_ms(step, example, calls=calls), "compiled fp32": _best_ms(fp32, example, calls=calls),
          "PT2E int8": _best_ms(int8, example, calls=calls), "dynamic int8": _best_ms(dynamic, example, calls=calls)}
    return {"rows": rows, "activations": "static" if static else "dynamic",
            "ms_per_step": {k: round(v, 3) for k, v in ms.items()},
            "compile_s": {"compiled fp32": round(fp32_s, 1), "PT2E int8": round(int8_s, 1)},
            "PT2E int8": error(pt2e_logits), "dynamic int8": error(dynamic_logits)}


def main() -> None:
    from machine import describe

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--calls", type=int, default=200, help="steps timed a round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "decoding_pt2e.json")
    args = parser.parse_args()
    _require_torchao()
    torch.set_num_threads(args.threads)
    table = []
    print(f"{'shape':24} {'rows':>4} {'act.':>7} {'eager fp32':>10} {'compiled':>9} {'PT2E int8':>9} "
          f"{'dyn int8':>9}  ms/step; PT2E int8 error, argmax agree")
    for name, shape in SHAPES.items():
        for rows in args.rows:
            for static in (False, True):
                row = {"shape": name, **one_row(shape, rows=rows, static=static, calls=args.calls)}
                table.append(row)
                ms = row["ms_per_step"]
                print(f"{name:24} {rows:4d} {row['activations']:>7} {ms['eager fp32']:10.3f} "
                      f"{ms['compiled fp32']:9.3f} {ms['PT2E int8']:9.3f} {ms['dynamic int8']:9.3f}  "
                      f"{row['PT2E int8']['max_rel_error']:.3f}, {row['PT2E int8']['argmax_agree']:.2f}",
                      flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": table, "command": " ".join(sys.argv), "threads": args.threads,
                                    "torch": torch.__version__, "machine": describe()}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
