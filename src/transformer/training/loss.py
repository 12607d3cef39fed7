"""Label-smoothed cross-entropy that ignores padding (section 5.4 of the paper, epsilon_ls = 0.1).

Shapes: N positions (any leading shape, flattened), V vocabulary.

The smoothed target puts ``1 - smoothing`` on the reference token and spreads ``smoothing``
uniformly over all V classes, exactly as ``F.cross_entropy(..., label_smoothing=)`` does, so

    loss = (1 - smoothing) * -log p(reference) + smoothing * mean_v(-log p(v)).

Padding positions are removed before the softmax: they add nothing to the loss or its gradient.
The sum is returned by default so that the caller can divide by the number of target tokens of a
whole (accumulated, distributed) batch rather than by each micro-batch's own count.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

REDUCTIONS = ("sum", "mean", "none")


def label_smoothed_cross_entropy(
    logits: Tensor,
    target: Tensor,
    *,
    smoothing: float = 0.1,
    ignore_index: int = 0,
    reduction: str = "sum",
) -> Tensor:
    """Cross-entropy of ``logits`` (..., V) against ``target`` (...) with label smoothing.

    Positions where ``target == ignore_index`` are skipped. ``reduction="sum"`` returns a scalar
    sum over non-pad positions, ``"mean"`` divides it by their number (0 when there are none), and
    ``"none"`` returns one value per non-pad position, (N_nonpad,). Computed in float32 whatever
    the dtype of ``logits``.
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and target {tuple(target.shape)} disagree on positions"
        )
    keep = target.reshape(-1) != ignore_index  # (N,)
    # Selecting rows (rather than multiplying by a mask) keeps pad logits out of the graph entirely.
    logp = F.log_softmax(logits.reshape(-1, logits.size(-1))[keep].float(), dim=-1)  # (N_nonpad, V)
    gold = target.reshape(-1)[keep]  # (N_nonpad,)
    nll = -logp.gather(1, gold[:, None]).squeeze(1)  # (N_nonpad,)
    loss = (1.0 - smoothing) * nll - smoothing * logp.mean(dim=-1) if smoothing > 0 else nll
    if reduction == "none":
        return loss
    total = loss.sum()
    return total / max(gold.numel(), 1) if reduction == "mean" else total
