"""ModelConfig: validation, presets, serialisation, and the paper's Table 3 parameter counts."""

from __future__ import annotations

import pytest

from transformer import ModelConfig, Transformer


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"d_model": 30, "num_heads": 4}, "not divisible"),
        ({"num_encoder_layers": 0}, "num_encoder_layers"),
        ({"num_decoder_layers": -1}, "num_decoder_layers"),
        ({"dropout": -0.1}, "dropout"),
        ({"dropout": 1.0}, "dropout"),
        ({"attention_dropout": 1.5}, "attention_dropout"),
        ({"d_ff": 0}, "d_ff"),
        ({"src_vocab_size": 0}, "src_vocab_size"),
        ({"pad_id": 100}, "pad_id"),
        ({"activation": "swish"}, "activation"),
        ({"positional": "rotary"}, "positional"),
        ({"share_embeddings": True, "tgt_vocab_size": 99}, "share_embeddings"),
        ({"max_len": 0}, "max_len"),
    ],
)
def test_impossible_settings_raise_value_error_naming_the_value(changes, fragment):
    with pytest.raises(ValueError, match=fragment):
        ModelConfig.tiny(50).replace(**changes)


def test_presets_follow_table_3():
    base = ModelConfig.base(1000)
    assert (base.d_model, base.d_ff, base.num_heads, base.dropout) == (512, 2048, 8, 0.1)
    assert base.num_encoder_layers == base.num_decoder_layers == 6
    big = ModelConfig.big(1000)
    assert (big.d_model, big.d_ff, big.num_heads, big.dropout) == (1024, 4096, 16, 0.3)
    # the paper's defaults unless asked otherwise
    assert not base.norm_first and base.activation == "relu" and base.positional == "sinusoidal"


def test_preset_accepts_separate_vocabularies_and_overrides():
    cfg = ModelConfig.base(src_vocab_size=100, tgt_vocab_size=200, d_model=256, num_heads=4)
    assert (cfg.src_vocab_size, cfg.tgt_vocab_size, cfg.d_model) == (100, 200, 256)
    assert ModelConfig.preset("small", 64) == ModelConfig.small(64)
    with pytest.raises(ValueError, match="unknown preset"):
        ModelConfig.preset("huge", 64)


def test_dict_round_trip_and_unknown_keys():
    cfg = ModelConfig.small(321, norm_first=True, tie_embeddings=True)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="colour"):
        ModelConfig.from_dict({**cfg.to_dict(), "colour": "red"})


def paper_count(d_model: int, d_ff: int, layers: int, vocab: int) -> int:
    """Parameters of the paper's model with one shared, tied embedding, counted from the equations."""
    attention = 4 * (d_model * d_model + d_model)  # W^Q, W^K, W^V, W^O with biases
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norm = 2 * d_model
    encoder = layers * (attention + ffn + 2 * norm)
    decoder = layers * (2 * attention + ffn + 3 * norm)
    return vocab * d_model + encoder + decoder + vocab  # embedding + stacks + output bias


@pytest.mark.parametrize(("preset", "paper_millions"), [("base", 65), ("big", 213)])
def test_table_3_parameter_counts(preset, paper_millions):
    cfg = ModelConfig.preset(preset, 37000, share_embeddings=True, tie_embeddings=True)
    model = Transformer(cfg)
    count = model.num_parameters()
    assert count == paper_count(cfg.d_model, cfg.d_ff, 6, 37000)
    assert count == sum(p.numel() for p in model.parameters())  # tied tensors counted once
    assert abs(count / 1e6 - paper_millions) / paper_millions < 0.04  # "about 65M", "213M"
