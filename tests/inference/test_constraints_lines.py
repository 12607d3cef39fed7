"""Constraints through the inference layer: a line with phrases is translated whole (so a phrase
can go wherever it fits), lines without are split as before; sampling is refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from transformer.config.decoding import DecodeOptions
from transformer.errors import InputError
from transformer.inference.lines import translate_lines
from transformer.inference.translator import Translation, Translator


class Recorder:
    """What translate_lines needs of a translator, recording the units it is given."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(max_len=64)
        self.src_tokenizer = SimpleNamespace(encode=lambda text: text.split())
        self.options = DecodeOptions()
        self.calls: list[tuple[list[str], object]] = []

    def translate(self, units, *, prefixes, keys, constraints=None, **call):
        self.calls.append((list(units), constraints))
        return [Translation(u.upper()) for u in units]


def test_a_line_with_phrases_is_translated_whole():
    recorder = Recorder()
    lines = ["One dog runs. Two cats sleep.", "Three birds sing. Four fish swim."]
    out = translate_lines(recorder, lines, constraints=[["Katzen"], []])  # type: ignore[arg-type]
    units, phrases = recorder.calls[0]
    assert units == ["One dog runs. Two cats sleep.", "Three birds sing.", "Four fish swim."]
    assert phrases == [["Katzen"], [], []]
    assert [t.sentences for t in out] == [1, 2]
    translate_lines(recorder, lines)  # type: ignore[arg-type]
    assert recorder.calls[1] == (["One dog runs.", "Two cats sleep.", "Three birds sing.", "Four fish swim."], None)


def test_sampling_with_constraints_is_refused(copy_model):
    translator = Translator(copy_model, None, None, bos_id=2, eos_id=3,
                            options=DecodeOptions(sampling=True))
    with pytest.raises(InputError, match="sampling"):
        translator.translate(["a"], constraints=[["b"]])
