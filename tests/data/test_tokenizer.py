"""SentencePiece tokenizer: special ids, exact round trip, training in memory, save/load."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from transformer.data.tokenizer_pair import load_tokenizers, save_tokenizers, train_tokenizers
from transformer.errors import InputError

EN = [
    "A man in an orange hat starring at something.",
    "Two young, White males are outside near many bushes.",
    "A little girl climbing into a wooden playhouse.",
    "Several men in hard hats are operating a giant pulley system.",
] * 20
DE = [
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
    "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.",
] * 20


@pytest.fixture(scope="module")
def joint() -> Tokenizer:
    src, tgt = train_tokenizers(EN, DE, vocab_size=320)
    assert src is tgt
    return src


def test_special_ids_are_fixed(joint: Tokenizer) -> None:
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert [joint.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert joint.vocab_size == 320


def test_encode_has_no_bos_eos_and_decode_skips_specials(joint: Tokenizer) -> None:
    ids = joint.encode("A little girl")
    assert ids and not {PAD_ID, BOS_ID, EOS_ID} & set(ids)
    assert joint.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == "A little girl"
    # an unknown piece is shown, never dropped in silence, unless asked
    assert joint.decode([*ids, UNK_ID]) == "A little girl ⁇ "  # SentencePiece's " ⁇ "
    assert joint.decode([*ids, UNK_ID], unknown=False) == "A little girl"
    assert joint.encode_batch(["A little girl", "Ein Mann"]) == [ids, joint.encode("Ein Mann")]
    assert joint.encode_batch([]) == []


def test_decode_accepts_tensors_and_rejects_out_of_range(joint: Tokenizer) -> None:
    import torch

    ids = joint.encode("Holz")
    assert joint.decode(torch.tensor(ids)) == "Holz"
    with pytest.raises(ValueError, match="99999"):
        joint.decode([99999])
    with pytest.raises(ValueError, match="-1"):
        joint.id_to_piece(-1)


def test_unseen_characters_become_bytes_not_unk(joint: Tokenizer) -> None:
    text = "日本語 🙂 ß"
    ids = joint.encode(text)
    assert UNK_ID not in ids
    assert joint.decode(ids) == text


# Any text: every Unicode scalar value (lone surrogates are not text: tested apart), with spaces,
# tabs, newlines and SentencePiece's own space symbol U+2581 made common on purpose.
ANY_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"), st.sampled_from([" ", "\t", "\n", "\u2581", "a", "ß"])
    ),
    max_size=60,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=ANY_TEXT)
def test_decode_encode_round_trips_exactly(joint: Tokenizer, text: str) -> None:
    ids = joint.encode(text)
    assert joint.decode(ids) == text
    assert joint.encode_batch([text, "x"])[0] == ids


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=ANY_TEXT)
def test_unigram_round_trips_exactly(unigram: Tokenizer, text: str) -> None:
    assert unigram.decode(unigram.encode(text)) == text


@pytest.fixture(scope="module")
def unigram() -> Tokenizer:
    return Tokenizer.train(EN + DE, vocab_size=330, model_type="unigram")


def test_lone_surrogates_are_refused(joint: Tokenizer) -> None:
    with pytest.raises(ValueError, match="not valid Unicode"):
        joint.encode("ab\ud800")
    with pytest.raises(ValueError, match="text 1: not valid Unicode"):
        joint.encode_batch(["ok", "\udcff"])


def test_literal_space_symbol_is_not_a_space(joint: Tokenizer) -> None:
    assert joint.decode(joint.encode("a\u2581b c")) == "a\u2581b c"
    assert joint.pieces("a\u2581b")[-4:-1] == ["<0xE2>", "<0x96>", "<0x81>"]


def test_encode_keeps_recent_texts_ids(monkeypatch) -> None:
    """A text asked for again is not encoded again (a line is checked, fitted to the model and
    translated), its ids are a fresh list each time, and the kept texts stay bounded."""
    from transformer.data import tokenizer as module

    tok = Tokenizer.train(EN, vocab_size=300)
    calls: list[str] = []
    real = tok._sp_encode
    monkeypatch.setattr(tok, "_sp_encode", lambda text: calls.append(text) or real(text))
    first = tok.encode("a dog runs")
    first.append(99)
    assert tok.encode("a dog runs") == real("a dog runs") and calls == ["a dog runs"]
    assert tok.encode("a\u2581b") == tok.encode("a\u2581b") and len(calls) == 2
    monkeypatch.setattr(module, "MEMO_TEXTS", 3)
    for text in ("one", "two", "three", "four"):
        tok.encode(text)
    assert len(tok._memo) <= 3


def test_training_writes_no_files(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Tokenizer.train(iter(EN), vocab_size=300)
    assert list(tmp_path.iterdir()) == []


def test_training_is_deterministic() -> None:
    assert Tokenizer.train(EN, vocab_size=300) == Tokenizer.train(EN, vocab_size=300)


def test_sampled_training_is_seeded() -> None:
    from transformer.data.tokenizer import _reservoir_sample

    texts = [f"sentence {i}" for i in range(1000)]
    sample = _reservoir_sample(iter(texts), size=50, seed=1)
    assert len(sample) == len(set(sample)) == 50 and set(sample) <= set(texts)
    assert sample == _reservoir_sample(texts, size=50, seed=1)
    assert sample != _reservoir_sample(texts, size=50, seed=2)
    assert _reservoir_sample(["a", "", "b"], size=5, seed=0) == ["a", "b"]
    tok = Tokenizer.train(EN + DE, vocab_size=320, sample_size=40, seed=3)
    assert tok == Tokenizer.train(EN + DE, vocab_size=320, sample_size=40, seed=3)


def test_separate_tokenizers_differ() -> None:
    src, tgt = train_tokenizers(EN, DE, vocab_size=300, joint=False)
    assert src is not tgt and src != tgt
    assert "Männer" in tgt.pieces("Männer")[0] or tgt.decode(tgt.encode("Männer")) == "Männer"


def test_bad_vocab_sizes_are_one_line_input_errors() -> None:
    with pytest.raises(InputError, match=r"vocab_size=5000 is too large .* at most \d+"):
        Tokenizer.train(EN, vocab_size=5000)
    with pytest.raises(InputError, match=r"vocab_size=100 is too small .* at least \d+"):
        Tokenizer.train(EN, vocab_size=100)
    with pytest.raises(InputError, match="no non-empty text"):
        Tokenizer.train(["", ""], vocab_size=300)
    with pytest.raises(ValueError, match="model_type"):
        Tokenizer.train(EN, vocab_size=300, model_type="wordpiece")


def test_char_model_for_small_demos() -> None:
    tok = Tokenizer.train(["zwei", "drei"], vocab_size=1000, model_type="char", byte_fallback=False)
    assert tok.pieces("zwei") == ["▁", "z", "w", "e", "i"]
    assert tok.vocab_size == 4 + len(set("▁zweidr"))


def test_pickle_round_trip(joint: Tokenizer) -> None:
    again = pickle.loads(pickle.dumps(joint))
    assert again == joint and again.encode("Holz") == joint.encode("Holz")


def test_save_and_load_joint(joint: Tokenizer, tmp_path) -> None:
    folder = save_tokenizers(joint, joint, tmp_path / "run" / "tokenizer")
    assert sorted(p.name for p in folder.iterdir()) == ["joint.model", "tokenizer.json"]
    src, tgt = load_tokenizers(folder)
    assert src is tgt and src == joint
    # a model directory holding tokenizer/ works too
    assert load_tokenizers(tmp_path / "run")[0] == joint


def test_save_and_load_separate(tmp_path) -> None:
    src, tgt = train_tokenizers(EN, DE, vocab_size=300, joint=False)
    save_tokenizers(src, tgt, tmp_path)
    loaded_src, loaded_tgt = load_tokenizers(tmp_path)
    assert (loaded_src, loaded_tgt) == (src, tgt)
    assert loaded_src is not loaded_tgt
    path = src.save(tmp_path, "alone")
    assert Tokenizer.load(path) == src


def test_load_missing_or_corrupt_is_input_error(joint: Tokenizer, tmp_path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_tokenizers(tmp_path / "nothing")
    with pytest.raises(InputError, match="tokenizer.json"):
        load_tokenizers(tmp_path)
    save_tokenizers(joint, joint, tmp_path)
    (tmp_path / "joint.model").write_bytes(b"not a model")
    with pytest.raises(InputError, match="joint.model: not a SentencePiece model") as err:
        load_tokenizers(tmp_path)
    assert "\n" not in str(err.value)
    (tmp_path / "joint.model").unlink()
    with pytest.raises(InputError, match="joint.model: tokenizer model not found"):
        load_tokenizers(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{broken")
    with pytest.raises(InputError, match="unreadable tokenizer index"):
        load_tokenizers(tmp_path)


def test_other_special_ids_are_refused(tmp_path) -> None:
    import io

    import sentencepiece as spm

    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(EN), model_writer=writer, vocab_size=50, minloglevel=2
    )  # SentencePiece's defaults: unk=0, bos=1, eos=2, no pad
    (tmp_path / "other.model").write_bytes(writer.getvalue())
    with pytest.raises(InputError, match="special ids"):
        Tokenizer.load(tmp_path / "other.model")


def test_all_pieces_are_each_ids_piece(number_tokenizer):
    pieces = number_tokenizer.all_pieces()
    assert pieces == [number_tokenizer.id_to_piece(i) for i in range(number_tokenizer.vocab_size)]


def _both_kinds(number_tokenizer):
    """Our SentencePiece tokenizer and a vocabulary-list one (Marian's) over the same pieces."""
    from transformer.data.vocab_tokenizer import VocabTokenizer

    return [number_tokenizer, VocabTokenizer(number_tokenizer.to_bytes(),
                                             number_tokenizer.all_pieces())]


def test_decode_and_id_to_piece_refuse_an_id_outside_the_vocabulary(number_tokenizer):
    import torch

    for tok in _both_kinds(number_tokenizer):
        size = tok.vocab_size
        ids = tok.encode("seven")
        assert tok.decode(torch.tensor(ids)) == tok.decode(ids) == "seven"
        for bad in (size, -1):
            with pytest.raises(ValueError, match=rf"^token id {bad} is outside the vocabulary \[0, {size}\)$"):
                tok.decode([*ids, bad])
            with pytest.raises(ValueError, match=rf"^token id {bad} is outside"):
                tok.id_to_piece(bad)
        assert tok.id_to_piece(size - 1) == tok.all_pieces()[-1]
