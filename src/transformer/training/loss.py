"""Label-smoothed cross-entropy that ignores padding (section 5.4 of the paper, epsilon_ls = 0.1).

Shapes: N positions (any leading shape, flattened), V vocabulary.

The smoothed target puts ``1 - smoothing`` on the reference token and spreads ``smoothing``
uniformly over all V classes, exactly as ``F.cross_entropy(..., label_smoothing=)`` does, so

    loss = (1 - smoothing) * -log p(reference) + smoothing * mean_v(-log p(v)).

Padding positions add nothing to the loss or its gradient (even if their logits are not finite).
The gradient is written by hand (one (N, V) tensor instead of log_softmax's chain of them): about
1.5x faster than autograd through ``F.cross_entropy`` on CPU, which the tests compare it with.
The sum is returned by default so that the caller can divide by the number of target tokens of a
whole (accumulated, distributed) batch rather than by each micro-batch's own count.
"""

from __future__ import annotations

from typing import Any

import torch
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
    flat = logits.reshape(-1, logits.size(-1)).float()  # (N, V)
    gold = target.reshape(-1)  # (N,)
    keep = gold != ignore_index  # (N,)
    loss = _SmoothedCrossEntropy.apply(flat, gold, keep, smoothing)  # (N,), 0 at padding
    if reduction == "none":
        return loss[keep]
    total = loss.sum()
    return total / max(int(keep.sum()), 1) if reduction == "mean" else total


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Per-position loss in few passes over the (N, V) logits, with a hand-written gradient.

    The loss of one position is -(1 - smoothing) * log p[gold] - smoothing * mean(log p), and its
    gradient with respect to the logits is softmax(x) - (1 - smoothing) * onehot(gold) - smoothing / V. Autograd
    through log_softmax, a row selection and two reductions would make several (N, V)
    temporaries; here backward writes one. Padding rows get zero loss and zero gradient even
    when their logits are not finite.
    """

    @staticmethod
    def forward(ctx: Any, logits: Tensor, gold: Tensor, keep: Tensor, smoothing: float) -> Tensor:
        # log_softmax and softmax have vectorised CPU kernels; torch.exp and logsumexp do not
        # (and slow down tenfold on very negative inputs), so the gradient is rebuilt by softmax
        logp = torch.log_softmax(logits, dim=-1)  # (N, V), freed after forward
        loss = -(1.0 - smoothing) * logp.gather(1, gold[:, None]).squeeze(1)  # (N,)
        if smoothing > 0:
            loss = loss - smoothing * logp.mean(dim=-1)
        ctx.save_for_backward(logits, gold, keep)
        ctx.smoothing = smoothing
        return torch.where(keep, loss, torch.zeros_like(loss))

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor) -> tuple[Tensor, None, None, None]:
        logits, gold, keep = ctx.saved_tensors
        smoothing, vocab = ctx.smoothing, logits.size(-1)
        weight = torch.where(keep, grad_loss, torch.zeros_like(grad_loss))[:, None]  # (N, 1)
        grad = torch.softmax(logits, dim=-1).mul_(weight)  # (N, V)
        if smoothing > 0:
            grad.sub_(weight * (smoothing / vocab))
        grad.scatter_add_(1, gold[:, None], weight * -(1.0 - smoothing))
        grad.index_fill_(0, (~keep).nonzero().squeeze(1), 0.0)  # non-finite pad logits: 0 * inf
        return grad, None, None, None
