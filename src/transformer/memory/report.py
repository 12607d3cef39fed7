"""The estimate (and, when given, the measured peak) as text."""

from __future__ import annotations

from transformer.memory.estimate import MemoryEstimate
from transformer.memory.measure import MeasuredPeak


def format_bytes(n: float) -> str:
    """Decimal units, as the seed's "27.5 GB": 1 kB = 1000 bytes."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def format_report(estimate: MemoryEstimate, measured: MeasuredPeak | None = None) -> str:
    """The breakdown as text: one line per term, the peak and, when given, the measured peak."""
    s = estimate.setting
    out = []
    if s.get("model", "").startswith("decoder-only"):
        out.append(f"training memory, {s['model']}: {s['num_layers']} layers, d_model={s['d_model']}, "
                   f"{s['num_heads']} heads, d_ff={s['d_ff']}, vocabulary {s['vocab_size']}")
        out.append(f"batch {s['batch_size']} x {s['seq_len']} tokens, "
                   f"{s['bytes_per_value']} bytes per value, Adam")
    else:
        c = s["config"]
        layers = (f"{c['num_encoder_layers']} encoder layers" if s["model"] == "encoder-only"
                  else f"{c['num_encoder_layers']}+{c['num_decoder_layers']} layers")
        vocab = (f"vocabulary {c['src_vocab_size']}, {s['num_labels']} labels"
                 if s["model"] == "encoder-only"
                 else f"vocabulary {c['src_vocab_size']}/{c['tgt_vocab_size']}")
        out.append(f"training memory, {s['model']}: d_model={c['d_model']}, {c['num_heads']} heads, "
                   f"{layers}, d_ff={c['d_ff']}, {vocab}")
        lengths = (f"{s['src_len']} tokens" if s["tgt_len"] is None
                   else f"{s['src_len']} source and {s['tgt_len']} target tokens")
        out.append(f"batch {s['batch_size']} x {lengths}, {s['precision']}, {s['device']}, Adam")
    width = max(len(x.name) for x in estimate.lines)
    out.append("")
    for x in estimate.lines:
        mark = "*" if x.name in estimate.peak_terms else " "
        out.append(f" {mark} {x.name:<{width}}  {format_bytes(x.bytes):>10}  {x.detail}")
    out.append("")
    where = f"{estimate.peak_phase}: the lines marked *"
    if estimate.peak_extra is not None:
        where += f" + {format_bytes(estimate.peak_extra.bytes)} of {estimate.peak_extra.detail}"
    out.append(f"   {'peak (estimate)':<{width}}  {format_bytes(estimate.peak_bytes):>10}  {where}")
    if measured is not None:
        ratio = estimate.peak_bytes / max(measured.peak_bytes, 1)
        out.append(f"   {'peak (measured)':<{width}}  {format_bytes(measured.peak_bytes):>10}  "
                   f"{measured.method} on {measured.device}; estimate/measured = {ratio:.3f}")
    return "\n".join(out)
