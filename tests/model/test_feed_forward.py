"""The position-wise FFN: Linear on the last axis is the same function as Conv1d(kernel_size=1)."""

from __future__ import annotations

import torch
from torch import nn

from transformer.model.feed_forward import PositionwiseFeedForward


class ConvFeedForward(nn.Module):
    """The tutorials' form: two 1x1 convolutions over (B, D, L), as the paper's section 3.3 says."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(d_model, d_ff, kernel_size=1)
        self.conv2 = nn.Conv1d(d_ff, d_model, kernel_size=1)

    def forward(self, x):
        y = self.conv2(torch.relu(self.conv1(x.transpose(1, 2))))  # (B, D, L)
        return y.transpose(1, 2)  # (B, L, D)


def test_linear_form_equals_conv1d_form_with_copied_weights():
    ffn = PositionwiseFeedForward(d_model=16, d_ff=40).eval()
    conv = ConvFeedForward(16, 40)
    with torch.no_grad():
        # a kernel-size-1 convolution's weight (out, in, 1) is a Linear weight (out, in)
        conv.conv1.weight.copy_(ffn.linear1.weight[:, :, None])
        conv.conv1.bias.copy_(ffn.linear1.bias)
        conv.conv2.weight.copy_(ffn.linear2.weight[:, :, None])
        conv.conv2.bias.copy_(ffn.linear2.bias)
    x = torch.randn(3, 9, 16)
    torch.testing.assert_close(ffn(x), conv(x), atol=1e-6, rtol=1e-5)


def test_each_position_is_transformed_independently():
    ffn = PositionwiseFeedForward(d_model=8, d_ff=16, activation="gelu").eval()
    x = torch.randn(2, 5, 8)
    full = ffn(x)
    for i in range(5):
        torch.testing.assert_close(full[:, i], ffn(x[:, i : i + 1])[:, 0])
