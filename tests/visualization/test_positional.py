"""`transformer plot positional`: the sinusoidal table as the seeds draw it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from transformer.cli import main
from transformer.model import sinusoidal_table
from transformer.visualization import plot_positional_encoding


def test_heat_map_shows_the_table_with_positions_down_and_dimensions_across():
    table = sinusoidal_table(16, 8)
    fig = plot_positional_encoding(table)
    ax = fig.axes[0]
    mesh = ax.collections[0]
    drawn = np.asarray(mesh.get_array()).reshape(16, 8)
    np.testing.assert_allclose(drawn, table.numpy())
    assert ax.get_xlabel().startswith("dimension") and ax.get_ylabel() == "position"
    assert mesh.get_clim() == (-1.0, 1.0)
    assert len(fig.axes) == 2  # and a colour bar


def test_plot_positional_command(tmp_path, png_size, capsys):
    out = tmp_path / "pe.png"
    assert main(["plot", "positional", "--d-model", "128", "--max-len", "64", "--out", str(out),
                 "--svg"]) == 0
    assert png_size(out)[0] > 0
    assert (tmp_path / "pe.svg").is_file()
    assert str(out) in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--d-model", "0"], ["--max-len", "-3"]])
def test_plot_positional_bad_sizes_exit_2(tmp_path, capsys, argv):
    out = tmp_path / "pe.png"
    assert main(["plot", "positional", *argv, "--out", str(out)]) == 2
    assert "must be between" in capsys.readouterr().err
    assert not out.exists()


def test_plots_need_no_display_and_never_load_pyplot(tmp_path):
    # An interactive backend requested and no display: the figures are built without pyplot, so
    # neither matters.
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["MPLBACKEND"] = "TkAgg"
    code = (
        "import sys\n"
        "from transformer.cli import main\n"
        f"assert main(['plot', 'positional', '--out', {str(tmp_path / 'p.png')!r}]) == 0\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
