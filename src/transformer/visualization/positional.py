"""The sinusoidal positional encoding (section 3.5) as a heat map: positions down, dimensions across.

Shapes: L positions, D d_model.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from torch import Tensor

from transformer.visualization.figures import new_figure, style


def plot_positional_encoding(table: Tensor, *, title: str | None = None) -> Figure:
    """Draw ``table`` (L, D), e.g. ``transformer.model.sinusoidal_table(L, D)``, as the seed
    tutorials do: ``pcolormesh`` with the red-blue map, position on the y axis, dimension ("depth")
    on the x axis, values in [-1, 1] and a colour bar."""
    if table.dim() != 2:
        raise ValueError(f"the table must be (positions, d_model), got shape {tuple(table.shape)}")
    length, d_model = table.shape
    values = table.detach().float().cpu().numpy()
    width = min(14.0, max(6.0, 4.0 + d_model / 40))
    height = min(10.0, max(3.5, 2.0 + length / 20))
    with style():
        fig = new_figure(width, height)
        ax = fig.subplots()
        mesh = ax.pcolormesh(values, cmap="RdBu", vmin=-1.0, vmax=1.0)
        ax.set_xlim(0, d_model)
        ax.set_xlabel("dimension (depth) i")
        ax.set_ylabel("position")
        fig.colorbar(mesh, ax=ax, label="PE(pos, i)")
        ax.set_title(title or f"sinusoidal positional encoding: {length} positions x d_model={d_model}")
    return fig
