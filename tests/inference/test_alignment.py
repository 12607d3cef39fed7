"""Word alignments from cross-attention: pieces placed in their words as SentencePiece marks them,
the documented rule against a second implementation over the model's attention API, batching that
changes nothing, and a line's pairs made from its sentences'."""

from __future__ import annotations

import random

import pytest
import torch

from helpers import save_translator
from transformer.inference.alignment import (
    DEFAULT_RULE,
    AlignmentRule,
    align_texts,
    best_pairs,
    cross_attention,
    line_pairs,
    membership,
    pharaoh,
    piece_spans,
    word_spans,
)

TEXTS = ["three hundred forty-five", "zweiundvierzig  und   sieben", "seven", " one  two ",
         "dreihundertzwölf tausend eins"]


@pytest.fixture(scope="module")
def bytes_tokenizer():
    from transformer.data.builtin_task import english_number, german_number
    from transformer.data.tokenizer import Tokenizer

    texts = [english_number(n) for n in range(1, 200)] + [german_number(n) for n in range(1, 200)]
    return Tokenizer.train(texts, vocab_size=300, byte_fallback=True)


def _word_of_pieces(pieces: list[str]) -> list[int]:
    """SentencePiece's own convention: a piece that starts with ▁ starts a word (a lone ▁ before
    another ▁, one of several spaces, goes with the word that follows)."""
    out, word = [], -1
    for k, piece in enumerate(pieces):
        following = pieces[k + 1] if k + 1 < len(pieces) else ""
        if piece == "\u2581" and following.startswith("\u2581"):
            out.append(word + 1)
            continue
        word += piece.startswith("\u2581")
        out.append(word)
    return out


@pytest.mark.parametrize("text", TEXTS)
def test_pieces_fall_in_the_words_sentencepiece_marks(number_tokenizer, text):
    ids = number_tokenizer.encode(text.strip())
    pieces = [number_tokenizer.id_to_piece(i) for i in ids]
    member = membership(piece_spans(number_tokenizer, ids), word_spans(text))
    assert member.sum(dim=1).tolist() == pytest.approx([1.0] * len(ids))
    assert member.argmax(dim=1).tolist() == _word_of_pieces(pieces)


def test_byte_pieces_and_lone_spaces_go_with_the_character_they_begin(bytes_tokenizer):
    text = "drei 😀x  € und ß"
    ids = bytes_tokenizer.encode(text)
    pieces = [bytes_tokenizer.id_to_piece(i) for i in ids]
    assert any(p.startswith("<0x") for p in pieces) and "\u2581" in pieces
    spans = piece_spans(bytes_tokenizer, ids)
    solid = "".join(text.split())
    for piece, (a, b) in zip(pieces, spans, strict=True):
        plain = piece.replace("\u2581", "")
        if plain and not piece.startswith("<0x"):
            assert solid[a:b] == plain
    member = membership(spans, word_spans(text))
    words = text.split()
    emoji_pieces = [k for k, p in enumerate(pieces) if p.startswith("<0x")][:4]  # 😀's 4 bytes
    assert [int(member[k].argmax()) for k in emoji_pieces] == [words.index("😀x")] * 4
    assert member.sum(dim=1).tolist() == pytest.approx([1.0] * len(ids))


def test_a_rule_picks_its_layer_head_and_row():
    cross = torch.rand(3, 4, 6, 5)  # (L, H, T, S)
    assert torch.equal(AlignmentRule(layer=2).pick(cross), cross[1].mean(dim=0)[:-1])
    assert torch.equal(AlignmentRule(layer=-1, head=3).pick(cross), cross[2, 2, :-1])
    assert torch.equal(AlignmentRule(layer=1, row="input").pick(cross), cross[0].mean(dim=0)[1:])
    assert DEFAULT_RULE.pick(cross).shape == (5, 5)
    for bad in (dict(layer=0), dict(head=0), dict(row="middle")):
        with pytest.raises(ValueError):
            AlignmentRule(**bad)
    with pytest.raises(ValueError, match="layer 4"):
        AlignmentRule(layer=4).pick(cross)
    with pytest.raises(ValueError, match="head 5"):
        AlignmentRule(head=5).pick(cross)


def test_each_target_word_takes_its_strongest_source_word():
    scores = torch.tensor([[0.1, 0.7, 0.2], [0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.1, 0.9]])
    assert best_pairs(scores) == [(1, 0), (0, 2), (2, 3)]  # no attention: no pair; a tie: the first
    assert pharaoh(best_pairs(scores)) == "1-0 0-2 2-3" and best_pairs(torch.zeros(0, 3)) == []


def test_batched_cross_attention_equals_each_pair_alone(copy_model):
    rng = random.Random(0)
    pairs = [([rng.randrange(4, 16) for _ in range(rng.randint(1, 9))],
              [rng.randrange(4, 16) for _ in range(rng.randint(0, 9))]) for _ in range(12)]
    batched = cross_attention(copy_model, pairs, max_tokens=40)
    cfg = copy_model.config
    for (s, t), got in zip(pairs, batched, strict=True):
        assert got.shape == (cfg.num_decoder_layers, cfg.num_heads, len(t) + 1, len(s))
        with torch.no_grad():
            out = copy_model(torch.tensor([s]), torch.tensor([[2, *t]]), return_attention=True)
        alone = torch.stack(out.attention.cross, dim=1)[0]  # (L, H, T, S)
        torch.testing.assert_close(got, alone, atol=1e-6, rtol=0)


@pytest.fixture(scope="module")
def run(tmp_path_factory, number_tokenizer):
    return save_translator(tmp_path_factory.mktemp("alignment") / "run", number_tokenizer,
                           max_len=32, config={"training": {"src_lang": "en", "tgt_lang": "de",
                                                            "decode_max_len_a": 1.0,
                                                            "decode_max_len_b": 4}})


PAIRS = [("three hundred forty-five", "dreihundert fünfundvierzig"),
         ("seven thousand twelve", "sieben tausend zwölf"), ("forty-two", "zwei und vierzig eins"),
         ("one", "")]


def _reference(loaded, source: str, target: str, *, layer: int) -> list[tuple[int, int]]:
    """The documented rule written again over the attention view: heads averaged, rows that
    predict the pieces, pieces summed into the words their ▁ marks."""
    from transformer.visualization.sentence import sentence_attention

    att = sentence_attention(loaded, source, target=target)
    rows = att.cross[layer].mean(dim=0)[:-1]  # (P, S): the last row predicts EOS
    src_word = torch.tensor(_word_of_pieces(att.src_tokens))
    tgt_word = torch.tensor(_word_of_pieces(att.tgt_out_tokens[:-1]))
    scores = torch.zeros(len(target.split()), len(source.split()))
    scores.index_put_((tgt_word[:, None], src_word[None, :]), rows, accumulate=True)
    return [(int(scores[j].argmax()), j) for j in range(scores.size(0))]


def test_align_texts_follows_the_documented_rule(run):
    from transformer.model_dir import load_model_dir

    loaded = load_model_dir(run)
    got = align_texts(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer,
                      [s for s, _ in PAIRS], [t for _, t in PAIRS])
    for (source, target), pairs in zip(PAIRS, got, strict=True):
        if not target:
            assert pairs == []
            continue
        assert pairs == _reference(loaded, source, target, layer=-1)
        assert [j for _, j in pairs] == list(range(len(target.split())))  # one pair a target word
    first = align_texts(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer,
                        [PAIRS[0][0]], [PAIRS[0][1]], rule=AlignmentRule(layer=1))
    assert first[0] == _reference(loaded, *PAIRS[0], layer=0)


def test_a_lines_pairs_are_its_sentences_pairs_moved_by_the_words_before():
    parts = [("Two dogs run.", "Zwei Hunde rennen.", [(0, 0), (1, 1), (2, 2)]),
             ("A cat", "Eine Katze schläft", [(0, 0), (1, 1), (1, 2)])]
    line = line_pairs("Two  dogs run. A cat", "Zwei Hunde rennen. Eine Katze schläft", parts)
    assert line == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (4, 5)]
    # a word cut in two by cut_to_fit is one word of the line; sentences joined without a space
    # (Japanese) make one target word of the two that meet
    cut = line_pairs("abcdef gh", "xy", [("abc", "x", [(0, 0)]), ("def gh", "y", [(1, 0)])])
    assert cut == [(0, 0), (1, 0)]


def test_translate_lines_attaches_each_lines_alignments(run):
    from transformer.inference.lines import translate_lines
    from transformer.inference.loader import load_translator

    lines = ["three hundred forty-five. seven", "", "forty-two thousand one"]
    translator = load_translator(run, beam_size=1, precision="fp32", alignments=True)
    got = translate_lines(translator, lines)
    plain = load_translator(run, beam_size=1, precision="fp32")
    assert [g.text for g in got] == [g.text for g in translate_lines(plain, lines)]
    assert translate_lines(plain, lines)[0].alignments is None
    assert got[1].alignments == []
    assert got[0].sentences == 2
    # the sentences' own translations, aligned one by one, then moved into the line
    first = translate_lines(translator, ["three hundred forty-five.", "seven"], split=False)
    units = [(u, t.text) for u, t in zip(["three hundred forty-five.", "seven"], first, strict=True)]
    pairs = align_texts(translator.model, translator.src_tokenizer, translator.tgt_tokenizer,
                        [u for u, _ in units], [t for _, t in units])
    want = line_pairs(lines[0], got[0].text, [(u, t, p) for (u, t), p in zip(units, pairs, strict=True)])
    assert got[0].alignments == want
    (alone,) = align_texts(translator.model, translator.src_tokenizer, translator.tgt_tokenizer,
                           [lines[2]], [got[2].text])
    assert got[2].alignments == alone
    assert all(0 <= i < len(lines[2].split()) for i, _ in alone)


def _membership_by_pairs(pieces, words):
    """Every piece against every word: the definition, for the sweep's check."""
    out = torch.zeros(len(pieces), len(words))
    for p, (a, b) in enumerate(pieces):
        for w, (c, d) in enumerate(words):
            if min(b, d) > max(a, c):
                out[p, w] = (min(b, d) - max(a, c)) / (b - a)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_spans_read_from_the_pieces_equal_the_spans_of_decoded_prefixes(number_tokenizer, bytes_tokenizer, seed):
    from transformer.inference.alignment import _additive_spans, spans_by_prefixes

    rng = random.Random(seed)
    words = ["three", "hundred", "forty-five", "zweiundvierzig", "und", "naïve", "日本", "⁇", "x"]
    fast_used = 0
    for tokenizer in (number_tokenizer, bytes_tokenizer):
        for _ in range(20):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
            ids = tokenizer.encode(text)
            slow = spans_by_prefixes(tokenizer, ids)
            fast = _additive_spans(tokenizer, ids)
            fast_used += fast is not None
            assert piece_spans(tokenizer, ids) == slow
            if fast is not None:
                assert fast == slow, text
            spans = word_spans(text)
            assert torch.equal(membership(slow, spans), _membership_by_pairs(slow, spans))
    assert fast_used >= 5  # the fast path is taken for plain pieces


def test_cross_weights_without_the_projection_equal_the_forwards(copy_model, sources):
    from transformer.inference.alignment import _cross_weights

    src = sources(7, 5, min_len=2)  # (B, S), padded
    tgt_in = torch.cat([torch.full((5, 1), 2), src[:, :-1]], dim=1)  # BOS, then the copy
    want = copy_model(src, tgt_in, return_attention=True).attention.cross
    got = _cross_weights(copy_model, src, tgt_in)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for k in range(len(want)):  # one layer, the layers above it not run
        (only,) = _cross_weights(copy_model, src, tgt_in, layer=k)
        torch.testing.assert_close(only, want[k], rtol=1e-5, atol=1e-6)
