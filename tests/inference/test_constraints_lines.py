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


def test_one_rendering_for_the_command_line_and_the_server():
    """``LineTranslation.to_dict``: the same figures under either text key, n-best and alignments
    only when asked for, a per-token figure None for a candidate of no tokens."""
    from transformer.inference.lines import LineTranslation

    t = LineTranslation("zwei drei", score=-1.5, log_prob=-2.0, tokens=4, nbest=[("zwei drei", -1.5), ("", -9.0)],
                        nbest_log_probs=[(-2.0, 4), (-9.0, 0)], sentences=1, alignments=[(0, 0), (1, 1)])
    http, cli = t.to_dict(), t.to_dict(text_key="translation", nbest=True, alignments=True)
    assert http == {"text": "zwei drei", "score": -1.5, "log_prob": -2.0, "log_prob_per_token": -0.5,
                    "sentences": 1, "cut_sentences": 0}
    assert {k: v for k, v in cli.items() if k not in ("translation", "nbest", "alignments")} == \
        {k: v for k, v in http.items() if k != "text"}
    assert cli["translation"] == "zwei drei" and cli["alignments"] == [[0, 0], [1, 1]]
    assert cli["nbest"] == [{"translation": "zwei drei", "score": -1.5, "log_prob": -2.0, "log_prob_per_token": -0.5},
                            {"translation": "", "score": -9.0, "log_prob": -9.0, "log_prob_per_token": None}]


def test_glossary_terms_follow_a_texts_own_phrases_once_and_each_phrase_is_checked_once():
    from transformer.errors import InputError
    from transformer.inference.glossary import check_phrases, merged_phrases

    glossary = [("dog", "Hund"), ("cat", "Katze"), ("hot dog", "Würstchen")]
    got = merged_phrases(["A dog and a cat.", "dogs", "A hot dog."], [[" Hund "], [], []], glossary)
    assert got == [["Hund", "Katze"], [], ["Hund", "Würstchen"]]
    seen = []

    def check(phrase):
        seen.append(phrase)
        if phrase == "Würstchen":
            raise InputError("the target vocabulary cannot spell 'Würstchen'")

    with pytest.raises(InputError, match=r"^in.txt, line 3: the target vocabulary cannot spell"):
        check_phrases(got, check, lambda i: f"in.txt, line {i + 1}")
    assert seen == ["Hund", "Katze", "Würstchen"]
