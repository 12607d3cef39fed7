"""Label-smoothed cross-entropy against PyTorch's reference; padding never contributes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer.training.loss import label_smoothed_cross_entropy

PAD = 0


def logits_and_target(b=3, t=5, v=11):
    logits = torch.randn(b, t, v, requires_grad=True)
    target = torch.randint(1, v, (b, t))
    target[0, 3:] = PAD
    target[2, 1:] = PAD
    return logits, target


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_matches_torch_cross_entropy_on_non_pad_tokens(smoothing):
    logits, target = logits_and_target()
    keep = target != PAD
    expected = F.cross_entropy(logits[keep], target[keep], label_smoothing=smoothing, reduction="sum")
    got = label_smoothed_cross_entropy(logits, target, smoothing=smoothing, ignore_index=PAD)
    torch.testing.assert_close(got, expected)
    # ignore_index in PyTorch's own loss agrees too
    reference = F.cross_entropy(logits.reshape(-1, 11), target.reshape(-1), ignore_index=PAD,
                                label_smoothing=smoothing, reduction="mean")
    mean = label_smoothed_cross_entropy(logits, target, smoothing=smoothing, reduction="mean")
    torch.testing.assert_close(mean, reference)
    per_token = label_smoothed_cross_entropy(logits, target, smoothing=smoothing, reduction="none")
    assert per_token.shape == (int(keep.sum()),)
    torch.testing.assert_close(per_token.sum(), expected)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_hand_written_gradient_matches_autograd_through_torch_cross_entropy(smoothing):
    logits, target = logits_and_target(b=4, t=6, v=13)
    reference = logits.detach().clone().requires_grad_(True)
    weights = torch.rand(()) * 3  # an upstream gradient other than 1
    (label_smoothed_cross_entropy(logits, target, smoothing=smoothing) * weights).backward()
    (F.cross_entropy(reference.reshape(-1, 13), target.reshape(-1), ignore_index=PAD,
                     label_smoothing=smoothing, reduction="sum") * weights).backward()
    torch.testing.assert_close(logits.grad, reference.grad)
    # the per-position losses carry their own upstream gradients through reduction="none"
    logits.grad = None
    per_token = label_smoothed_cross_entropy(logits, target, smoothing=smoothing, reduction="none")
    upstream = torch.randn_like(per_token)
    (per_token * upstream).sum().backward()
    reference.grad = None
    keep = target != PAD
    ref_tokens = F.cross_entropy(reference[keep], target[keep], label_smoothing=smoothing,
                                 reduction="none")
    (ref_tokens * upstream).sum().backward()
    torch.testing.assert_close(logits.grad, reference.grad)


def test_default_smoothing_is_the_papers():
    logits, target = logits_and_target()
    keep = target != PAD
    expected = F.cross_entropy(logits[keep], target[keep], label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(label_smoothed_cross_entropy(logits, target), expected)


def test_pad_positions_never_contribute_to_loss_or_gradient():
    logits, target = logits_and_target()
    loss = label_smoothed_cross_entropy(logits, target)
    loss.backward()
    pad = target == PAD
    assert torch.all(logits.grad[pad] == 0)
    assert torch.all(logits.grad[~pad].abs().sum(-1) > 0)
    # garbage (even inf/NaN) at pad positions changes nothing
    changed = logits.detach().clone()
    changed[pad] = float("nan")
    changed[0, 4, 0] = float("inf")
    torch.testing.assert_close(label_smoothed_cross_entropy(changed, target), loss.detach())


def test_all_padding_gives_zero_not_nan():
    logits = torch.randn(2, 3, 7)
    target = torch.zeros(2, 3, dtype=torch.long)
    assert label_smoothed_cross_entropy(logits, target).item() == 0.0
    assert label_smoothed_cross_entropy(logits, target, reduction="mean").item() == 0.0


def test_bfloat16_logits_are_computed_in_float32():
    logits, target = logits_and_target()
    got = label_smoothed_cross_entropy(logits.detach().bfloat16(), target)
    assert got.dtype == torch.float32
    expected = label_smoothed_cross_entropy(logits.detach().bfloat16().float(), target)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    "kwargs", [{"smoothing": 1.0}, {"smoothing": -0.1}, {"reduction": "avg"}]
)
def test_bad_arguments_raise_value_error(kwargs):
    logits, target = logits_and_target()
    with pytest.raises(ValueError):
        label_smoothed_cross_entropy(logits, target, **kwargs)


def test_shape_mismatch_is_named():
    with pytest.raises(ValueError, match="disagree"):
        label_smoothed_cross_entropy(torch.randn(2, 3, 5), torch.ones(2, 4, dtype=torch.long))
