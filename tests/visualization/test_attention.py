"""Attention pictures: the pure plotting functions, and `transformer attention` on tiny models."""

from __future__ import annotations

import json

import pytest
import torch

from transformer.cli import main
from transformer.visualization import (
    average_heads,
    plot_alignment,
    plot_attention_grid,
    save_figure,
)


def _weights(layers: int, heads: int, lq: int, lk: int) -> list[torch.Tensor]:
    return [torch.randn(heads, lq, lk).softmax(-1) for _ in range(layers)]


def _tokens(n: int) -> list[str]:
    return [f"▁w{i}" for i in range(n)]


def test_grid_has_a_titled_panel_per_layer_and_head_and_a_colour_bar():
    fig = plot_attention_grid(_weights(2, 3, 4, 5), query_tokens=_tokens(4),
                              key_tokens=_tokens(5), title="cross")
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == [f"layer {layer}, head {h}" for layer in (1, 2) for h in (1, 2, 3)]
    assert len(fig.axes) == 2 * 3 + 1  # the panels and one colour bar
    assert fig._suptitle.get_text() == "cross"
    bottom_left = fig.axes[3]
    assert [t.get_text() for t in bottom_left.get_xticklabels()] == _tokens(5)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == _tokens(4)


def test_grid_png_grows_with_the_number_of_tokens(tmp_path, png_size):
    sizes = []
    for n in (4, 12):
        fig = plot_attention_grid(_weights(2, 2, n, n), query_tokens=_tokens(n),
                                  key_tokens=_tokens(n))
        (path,) = save_figure(fig, tmp_path / f"grid{n}.png")
        sizes.append(png_size(path))
    assert sizes[1][0] > sizes[0][0] and sizes[1][1] > sizes[0][1]


def test_alignment_saves_png_and_svg(tmp_path, png_size):
    weights = torch.randn(3, 4, 6).softmax(-1)  # (H, T, S)
    fig = plot_alignment(average_heads(weights), _tokens(6), _tokens(4), tmp_path / "a.png",
                         svg=True)
    assert png_size(tmp_path / "a.png")[0] > 0
    assert (tmp_path / "a.svg").read_text().lstrip().startswith("<?xml")
    assert len(fig.axes) == 2  # the map and its colour bar
    assert torch.allclose(average_heads(weights), weights.mean(0))


def test_tokens_are_drawn_as_typed_even_with_dollar_signs(tmp_path, png_size):
    tokens = ["$5", "a$b$", "▁über", "서울"]
    fig = plot_attention_grid(_weights(1, 1, 4, 4), query_tokens=tokens, key_tokens=tokens)
    (path,) = save_figure(fig, tmp_path / "t.png")  # mathtext would fail on "a$b$"
    assert png_size(path)[0] > 0


def test_bad_shapes_are_value_errors():
    with pytest.raises(ValueError, match="key_tokens has 3 tokens"):
        plot_attention_grid(_weights(1, 2, 4, 4), query_tokens=_tokens(4), key_tokens=_tokens(3))
    with pytest.raises(ValueError, match="one sentence"):
        plot_attention_grid([torch.rand(2, 1, 3, 3)], query_tokens=_tokens(3),
                            key_tokens=_tokens(3))
    with pytest.raises(ValueError, match=r"\(T, S\)"):
        plot_alignment(torch.rand(2, 3, 3), _tokens(3), _tokens(3))


def test_save_refuses_a_missing_folder_or_unknown_format(tmp_path):
    from transformer.errors import InputError

    fig = plot_alignment(torch.rand(2, 2), _tokens(2), _tokens(2))
    with pytest.raises(InputError, match="does not exist"):
        save_figure(fig, tmp_path / "missing" / "a.png")
    with pytest.raises(InputError, match="unknown picture format"):
        save_figure(fig, tmp_path / "a.jpg")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "b.png").mkdir()  # a folder named like a picture (another verb's --out)
    (tmp_path / "c.svg").mkdir()
    for name, svg in (("b.png", False), ("c.png", True)):
        with pytest.raises(InputError, match="is a folder"):
            save_figure(fig, tmp_path / name, svg=svg)
    assert not (tmp_path / "c.png").exists()  # nothing half-written


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross", "alignment"])
def test_attention_command_writes_pngs(translation_dir, tmp_path, png_size, kind, capsys):
    out = tmp_path / f"{kind}.png"
    argv = ["attention", "--model", str(translation_dir), "two dogs play in the snow",
            "--kind", kind, "--out", str(out), "--max-len", "6", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    expected = [str(out)] if kind == "alignment" else [str(out), str(tmp_path / f"{kind}-alignment.png")]
    assert report["files"] == expected
    for f in expected:
        assert png_size(f)[0] > 0
    assert report["kind"] == kind and report["task"] == "translation"
    assert report["target_tokens"][-1] == "</s>"


def test_attention_picture_grows_with_the_sentence(translation_dir, tmp_path, png_size):
    sizes = []
    for name, sentence in (("short", "a man"), ("long", "two dogs play in the snow and a man rides")):
        out = tmp_path / f"{name}.png"
        assert main(["attention", "--model", str(translation_dir), sentence, "--kind", "encoder",
                     "--out", str(out)]) == 0
        sizes.append(png_size(out))
    assert sizes[1][0] > sizes[0][0] and sizes[1][1] > sizes[0][1]


def test_attention_svg_and_classifier(classifier_dir, tmp_path, png_size, capsys):
    out = tmp_path / "cls.png"
    assert main(["attention", "--model", str(classifier_dir), "the girl reads a book",
                 "--out", str(out), "--svg"]) == 0
    text = capsys.readouterr().out
    assert "label:" in text
    assert png_size(out)[0] > 0 and (tmp_path / "cls.svg").is_file()
    assert main(["attention", "--model", str(classifier_dir), "a book", "--kind", "cross",
                 "--out", str(tmp_path / "x.png")]) == 2
    assert "only encoder self-attention" in capsys.readouterr().err


@pytest.mark.parametrize("sentence, model, fragment", [
    ("a man", "missing-dir", "no such model directory"),
    ("   ", None, "empty"),
    ("", None, "empty"),
])
def test_attention_command_bad_input_exits_2(translation_dir, tmp_path, capsys, sentence, model,
                                             fragment):
    out = tmp_path / "a.png"
    model_dir = str(tmp_path / model) if model else str(translation_dir)
    assert main(["attention", "--model", model_dir, sentence, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1
    assert not out.exists()


def test_attention_layer_out_of_range_exits_2(translation_dir, tmp_path, capsys):
    assert main(["attention", "--model", str(translation_dir), "a man", "--kind", "alignment",
                 "--layer", "3", "--out", str(tmp_path / "a.png")]) == 2
    assert "1..2" in capsys.readouterr().err


def test_attention_unavailable_device_exits_2(translation_dir, tmp_path, capsys):
    device = "cuda" if not torch.cuda.is_available() else "bogus"
    assert main(["attention", "--model", str(translation_dir), "a man", "--device", device,
                 "--out", str(tmp_path / "a.png")]) == 2
    assert "--device" in capsys.readouterr().err


def test_attention_command_draws_one_sentence_of_several(translation_dir, tmp_path, capsys):
    from transformer.model_dir import load_model_dir
    from transformer.visualization.sentence import sentence_attention

    first, second = "Two dogs play in the snow", "A man reads"
    for number, shown in ((1, first), (2, second)):
        out = tmp_path / f"s{number}.png"
        assert main(["attention", "--model", str(translation_dir), f"{first}. {second}.",
                     "--sentence-number", str(number), "--out", str(out), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["sentence"] == f"{shown}." and data["sentences"] == [f"{first}.", f"{second}."]
        alone = sentence_attention(load_model_dir(translation_dir), f"{shown}.")
        assert data["source_tokens"] == alone.src_tokens and out.exists()
    assert main(["attention", "--model", str(translation_dir), f"{first}. {second}.",
                 "--sentence-number", "3"]) == 2
    assert "--sentence-number 3 is out of range: the text has 2 sentences" in capsys.readouterr().err
