"""Pictures: attention maps, positional encodings, training curves.

Every function returns a ``matplotlib.figure.Figure`` built without pyplot (so no display is
needed) and :func:`save_figure` writes it atomically as PNG, SVG or PDF.
"""

from transformer.visualization.attention import average_heads, plot_alignment, plot_attention_grid
from transformer.visualization.curves import plot_training_curves, read_metrics
from transformer.visualization.figures import save_figure
from transformer.visualization.positional import plot_positional_encoding

__all__ = [
    "average_heads",
    "plot_alignment",
    "plot_attention_grid",
    "plot_positional_encoding",
    "plot_training_curves",
    "read_metrics",
    "save_figure",
]
