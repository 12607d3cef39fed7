"""Forced-decoding scores: equal to the training loss's sum (label smoothing 0), whatever the
batching; the right pair ranks above a shuffled one; lengths and bad input as documented."""

from __future__ import annotations

import random

import pytest
import torch

from helpers import save_translator
from transformer import ModelConfig
from transformer.data.collation import collate_pairs
from transformer.errors import InputError
from transformer.inference.scoring import (
    Scorer,
    check_pairs,
    load_scorer,
    score_ids,
    score_pairs,
    scorer_for,
)
from transformer.training.translation_task import TranslationTask

COPY_PAD, COPY_BOS, COPY_EOS, COPY_VOCAB = 0, 2, 3, 16  # the copy_model of tests/conftest.py


def random_pairs(count: int, *, seed: int = 0, max_len: int = 12) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)
    words = range(4, COPY_VOCAB)
    return [([rng.choice(words) for _ in range(rng.randint(1, max_len))],
             [rng.choice(words) for _ in range(rng.randint(0, max_len))]) for _ in range(count)]


def training_loss_sum(model, pair) -> float:
    """The training code path: TranslationTask.loss (training/loss.py), label smoothing 0."""
    task = TranslationTask(label_smoothing=0.0, pad_id=COPY_PAD, bos_id=COPY_BOS, eos_id=COPY_EOS)
    with torch.no_grad():
        return float(task.loss(model, collate_pairs([pair], bos_id=COPY_BOS, eos_id=COPY_EOS)))


def test_the_score_is_minus_the_training_loss_sum(copy_model):
    pairs = random_pairs(16)
    scores = score_ids(copy_model, pairs, max_tokens=64, bos_id=COPY_BOS, eos_id=COPY_EOS)
    for pair, got in zip(pairs, scores, strict=True):
        assert got.log_prob == pytest.approx(-training_loss_sum(copy_model, pair), rel=1e-6, abs=1e-5)
        assert got.tokens == len(pair[1]) + 1  # the target and EOS
        assert got.log_prob_per_token == pytest.approx(got.log_prob / got.tokens)


def test_batching_and_order_do_not_change_a_score(copy_model):
    pairs = random_pairs(24, seed=1)
    one_batch = score_ids(copy_model, pairs, max_tokens=4096, bos_id=COPY_BOS, eos_id=COPY_EOS)
    many = score_ids(copy_model, pairs, max_tokens=20, bos_id=COPY_BOS, eos_id=COPY_EOS)
    backwards = score_ids(copy_model, pairs[::-1], max_tokens=40, bos_id=COPY_BOS, eos_id=COPY_EOS)
    for a, b, c in zip(one_batch, many, backwards[::-1], strict=True):
        assert a.log_prob == pytest.approx(b.log_prob, abs=1e-5)
        assert a.log_prob == pytest.approx(c.log_prob, abs=1e-5)


def test_the_copy_ranks_above_a_shuffled_copy(copy_model):
    """The copy model's reference (the source itself) against the same words shuffled: the model
    is trained for a few dozen steps only, so a clear majority (not all) must rank right; a score
    that ignored the target or misplaced it by a position would rank them at chance."""
    rng = random.Random(3)
    sources = [[rng.randrange(4, COPY_VOCAB) for _ in range(rng.randint(4, 8))] for _ in range(60)]
    shuffled = []
    for s in sources:
        other = s[:]
        while other == s and len(set(s)) > 1:
            rng.shuffle(other)
        shuffled.append(other)
    kw = dict(bos_id=COPY_BOS, eos_id=COPY_EOS)
    right = score_ids(copy_model, [(s, s) for s in sources], **kw)
    wrong = score_ids(copy_model, list(zip(sources, shuffled, strict=True)), **kw)
    ahead = sum(r.log_prob > w.log_prob for r, w, s, o in
                zip(right, wrong, sources, shuffled, strict=True) if s != o)
    assert ahead >= 2 / 3 * sum(s != o for s, o in zip(sources, shuffled, strict=True))


def test_a_pair_that_does_not_fit_is_refused_by_score_ids(copy_model):
    limit = copy_model.config.max_len
    with pytest.raises(ValueError, match="pair 1"):
        score_ids(copy_model, [([4], [5]), ([4], [5] * limit)])
    assert score_ids(copy_model, []) == []


# --- text: a model directory ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def run(tmp_path_factory, number_tokenizer):
    return save_translator(tmp_path_factory.mktemp("scoring") / "run", number_tokenizer,
                           max_len=16, config={"training": {"src_lang": "en", "tgt_lang": "de"}})


@pytest.fixture(scope="module")
def scorer(run):
    return load_scorer(run, precision="fp32")


def test_text_pairs_are_scored_as_their_ids(scorer):
    sources = ["forty-two", "  three hundred twelve ", "seven"]
    targets = ["zweiundvierzig", "dreihundertzwölf", " sieben"]
    got = score_pairs(scorer, sources, targets)
    tok = scorer.src_tokenizer
    ids = [(tok.encode(s.strip()), tok.encode(t.strip())) for s, t in zip(sources, targets, strict=True)]
    want = score_ids(scorer.model, ids)
    assert [g.log_prob for g in got] == pytest.approx([w.log_prob for w in want], abs=1e-6)
    assert [g.tokens for g in got] == [len(t) + 1 for _, t in ids]
    assert not any(g.cut for g in got)


def test_empty_sides_are_scored_not_refused(scorer):
    got = score_pairs(scorer, ["", "seven", ""], ["sieben", "", ""])
    assert [g.tokens for g in got] == [len(scorer.tgt_tokenizer.encode("sieben")) + 1, 1, 1]
    assert all(torch.isfinite(torch.tensor(g.log_prob)) and g.log_prob < 0 for g in got)
    # an empty target is EOS alone: log p(EOS | source) as a direct forward computes it
    src = torch.tensor([scorer.src_tokenizer.encode("seven")])
    with torch.no_grad():
        logits = scorer.model(src, torch.tensor([[2]]))  # BOS
    assert got[1].log_prob == pytest.approx(float(logits[0, 0].log_softmax(-1)[3]), abs=1e-5)


def test_a_long_source_is_cut_as_translate_cuts_it(scorer):
    limit = scorer.model.config.max_len
    long = " ".join(["seven"] * (limit + 5))
    ids = scorer.src_tokenizer.encode(long)
    assert len(ids) > limit
    (got,) = score_pairs(scorer, [long], ["sieben"])
    (cut,) = score_ids(scorer.model, [(ids[:limit], scorer.tgt_tokenizer.encode("sieben"))])
    assert got.cut and got.log_prob == pytest.approx(cut.log_prob, abs=1e-6)


def test_a_long_target_is_refused_naming_its_line(scorer):
    limit = scorer.model.config.max_len
    long = "sieben" * limit
    with pytest.raises(InputError, match=r"^tgt.txt, line 3: \d+ tokens, more than the 15 .*\(and 1 more\)$"):
        score_pairs(scorer, ["a", "b", "c", "d"], ["sieben", "acht", long, long],
                    names=("src.txt", "tgt.txt"))
    with pytest.raises(InputError, match=r"^targets\[0\]: "):
        score_pairs(scorer, ["a"], [long], where=lambda name, i: f"{name}[{i}]")


@pytest.mark.parametrize("sources, targets, message", [
    (["a", "b"], ["c"], "tgt.txt has 1 lines but src.txt has 2"),
    ([], [], "src.txt holds no lines to score"),
])
def test_bad_pairs_are_refused_in_one_line(sources, targets, message):
    with pytest.raises(InputError, match=message):
        check_pairs(sources, targets, names=("src.txt", "tgt.txt"))


def test_int8_scores_with_the_float32_weights(run):
    from transformer.model_dir import load_model_dir

    scorer = scorer_for(load_model_dir(run), precision="int8")
    assert scorer.precision == "fp32"
    assert next(scorer.model.parameters()).dtype == torch.float32


def test_a_classifier_is_refused(tmp_path, number_tokenizer):
    from transformer import TransformerClassifier
    from transformer.model_dir import save_model_dir

    cfg = ModelConfig.tiny(number_tokenizer.vocab_size, d_model=16, d_ff=32, num_heads=2,
                           num_encoder_layers=1, max_len=16)
    save_model_dir(tmp_path / "clf", TransformerClassifier(cfg, num_labels=2),
                   config={"task": "classification", "labels": ["a", "b"],
                           "classifier": {"num_labels": 2}},
                   src_tokenizer=number_tokenizer, tgt_tokenizer=None)
    with pytest.raises(InputError, match="holds a classifier"):
        load_scorer(tmp_path / "clf")
    with pytest.raises(InputError, match="--max-tokens must be positive"):
        load_scorer(tmp_path / "clf", max_tokens=0)
    assert isinstance(load_scorer.__doc__, str) and Scorer.__doc__
