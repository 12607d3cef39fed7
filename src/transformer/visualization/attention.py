"""Attention maps: a grid of layers x heads, and a head-averaged source-target alignment.

Shapes: L layers, H heads, Lq query positions (rows), Lk key positions (columns), S source length,
T target length. Weights are attention probabilities, rows summing to 1 (padding rows to 0).

Pictures are sized to the sentence: each token gets a fixed cell (smaller only when the whole grid
would be too large to open), so a longer sentence gives a larger image with readable labels.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure
from torch import Tensor

from transformer.visualization.figures import (
    check_tokens,
    new_figure,
    save_figure,
    style,
    title_height,
    wrap_title,
)

CELL = 0.32  # inches per token in a grid panel
ALIGNMENT_CELL = 0.42  # inches per token in the alignment picture
MAX_SIDE = 40.0  # inches: beyond this the cells shrink
MIN_LABEL_CELL = 0.12  # inches: smaller cells drop their token labels
CHAR = 0.075  # inches per label character at the tick font size
CMAP = "viridis"


def _heads(weights: Tensor, what: str) -> np.ndarray:
    """One layer's weights, (H, Lq, Lk) or (1, H, Lq, Lk), as a float array (H, Lq, Lk)."""
    if weights.dim() == 4:
        if weights.size(0) != 1:
            raise ValueError(f"{what}: expected one sentence, got a batch of {weights.size(0)}")
        weights = weights[0]
    if weights.dim() != 3:
        raise ValueError(f"{what}: expected (H, Lq, Lk) weights, got shape {tuple(weights.shape)}")
    return weights.detach().float().cpu().numpy()


def average_heads(weights: Tensor) -> Tensor:
    """(H, Lq, Lk) or (1, H, Lq, Lk) weights -> their mean over heads, (Lq, Lk)."""
    return torch.from_numpy(_heads(weights, "weights").mean(axis=0))


def _label_width(tokens: Sequence[str]) -> float:
    return CHAR * max([len(t) for t in tokens] + [1])


def plot_attention_grid(
    weights: Sequence[Tensor] | Tensor,
    *,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    title: str = "",
) -> Figure:
    """A grid of heat maps, one row per layer and one column per head.

    ``weights`` holds one (H, Lq, Lk) tensor per layer (or is an (L, H, Lq, Lk) tensor; a leading
    batch of one is accepted). Rows are labelled with ``query_tokens`` (Lq), columns with
    ``key_tokens`` (Lk); every panel is titled with its layer and head (counted from 1), and one
    colour bar gives the scale, shared by all panels (0 to the largest weight).
    """
    layers = [_heads(w, f"layer {i + 1}") for i, w in enumerate(weights)]
    if not layers:
        raise ValueError("no attention weights to draw")
    shape = layers[0].shape
    for i, w in enumerate(layers):
        if w.shape != shape:
            raise ValueError(f"layer {i + 1} has weights {w.shape}, layer 1 has {shape}")
    heads, lq, lk = shape
    rows_text = check_tokens("query_tokens", query_tokens, lq)
    cols_text = check_tokens("key_tokens", key_tokens, lk)
    n_rows, n_cols = len(layers), heads
    cell = min(CELL, MAX_SIDE / (n_cols * lk), MAX_SIDE / (n_rows * lq))
    labels = cell >= MIN_LABEL_CELL
    font = max(4.0, min(8.0, cell * 26))
    left = _label_width(rows_text) * font / 8 if labels else 0.2
    bottom = _label_width(cols_text) * font / 8 if labels else 0.2
    width = n_cols * (lk * cell + 0.2) + left + 1.0
    height = n_rows * (lq * cell + 0.35) + bottom + 0.3 + title_height(title, width)
    vmax = max(float(w.max()) for w in layers) or 1.0
    with style():
        fig = new_figure(width, height)
        axes = fig.subplots(n_rows, n_cols, squeeze=False)
        image = None
        for layer, w in enumerate(layers):
            for head in range(heads):
                ax = axes[layer][head]
                image = ax.imshow(w[head], cmap=CMAP, vmin=0.0, vmax=vmax, aspect="equal",
                                  interpolation="nearest")
                ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=max(font, 6.0))
                ax.set_xticks(range(lk))
                ax.set_yticks(range(lq))
                show_y = labels and head == 0
                show_x = labels and layer == n_rows - 1
                ax.set_yticklabels(rows_text if show_y else [], fontsize=font)
                ax.set_xticklabels(cols_text if show_x else [], fontsize=font, rotation=90)
                ax.tick_params(length=0)
        fig.colorbar(image, ax=axes, shrink=min(1.0, 4.0 / height + 0.3),
                     label="attention weight")
        if title:
            fig.suptitle(wrap_title(title, width))
    return fig


def plot_alignment(
    weights: Tensor,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    path: str | os.PathLike[str] | None = None,
    *,
    title: str = "source-target alignment (cross-attention averaged over heads)",
    svg: bool = False,
) -> Figure:
    """A source-target alignment: ``weights`` (T, S), e.g. :func:`average_heads` of one layer's
    cross-attention, with target tokens (T) down the side and source tokens (S) along the top.

    Returns the Figure; with ``path`` it is also saved there (and as SVG with ``svg``).
    """
    if weights.dim() != 2:
        raise ValueError(f"alignment weights must be (T, S), got shape {tuple(weights.shape)}")
    w = weights.detach().float().cpu().numpy()
    t, s = w.shape
    rows_text = check_tokens("tgt_tokens", tgt_tokens, t)
    cols_text = check_tokens("src_tokens", src_tokens, s)
    cell = min(ALIGNMENT_CELL, MAX_SIDE / s, MAX_SIDE / t)
    labels = cell >= MIN_LABEL_CELL
    font = max(4.0, min(9.0, cell * 24))
    left = _label_width(rows_text) * font / 8 if labels else 0.2
    top = _label_width(cols_text) * font / 8 if labels else 0.2
    width = max(s * cell + left + 1.3, 4.0)
    height = t * cell + top + 0.4 + title_height(title, width)
    with style():
        fig = new_figure(width, height)
        ax = fig.subplots()
        image = ax.imshow(w, cmap=CMAP, vmin=0.0, vmax=float(w.max()) or 1.0, aspect="equal",
                          interpolation="nearest")
        ax.xaxis.tick_top()
        ax.set_xticks(range(s))
        ax.set_yticks(range(t))
        ax.set_xticklabels(cols_text if labels else [], fontsize=font, rotation=90)
        ax.set_yticklabels(rows_text if labels else [], fontsize=font)
        ax.tick_params(length=0)
        ax.set_xlabel("source")
        ax.xaxis.set_label_position("top")
        ax.set_ylabel("target")
        fig.colorbar(image, ax=ax, shrink=min(1.0, 3.0 / height + 0.4), label="attention weight")
        if title:
            fig.suptitle(wrap_title(title, width))
    if path is not None:
        save_figure(fig, path, svg=svg)
    return fig
