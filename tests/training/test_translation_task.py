"""The translation task: validation loss, greedy BLEU/chrF/exact match, decoding order."""

from __future__ import annotations

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.training.translation_task import TranslationTask


def test_translate_ids_keeps_the_input_order(synth):
    model = synth.tiny_model().eval()
    sources = [[5, 6, 7, 8, 9], [4], [7, 7], [9, 8, 7, 6, 5, 4, 5]]
    one_by_one = [TranslationTask().translate_ids(model, [s])[0] for s in sources]
    batched = TranslationTask(decode_batch_size=3).translate_ids(model, sources)
    assert batched == one_by_one


def test_translate_ids_packs_once_for_all_batches_and_keeps_no_copy(synth, monkeypatch):
    """Validation during training: one packing for every batch, and no packed copy held until
    the next validation (the weights will have changed)."""
    from transformer.decoding import FastDecoder, packing

    model = synth.tiny_model().eval()
    if not packing.can_pack(model):
        pytest.skip("packing does not apply here")
    made = []
    original = FastDecoder.steps

    def steps(self):
        before = self.packs
        result = original(self)
        made.append((self, self.packs - before))
        return result

    sources = [[5, 6, 7, 8, 9], [4], [7, 7], [9, 8, 7, 6, 5, 4, 5]]
    monkeypatch.setattr(FastDecoder, "steps", steps)
    TranslationTask(decode_batch_size=1).translate_ids(model, sources)
    assert [packs for _, packs in made] == [1, 0, 0, 0]  # packed once, though four batches were decoded
    assert len({id(decoder) for decoder, _ in made}) == 1  # one decoder, local to the call
    made.clear()
    TranslationTask().translate_ids(model, sources[:1])
    assert [packs for _, packs in made] == [1]  # the next validation packs afresh


def test_evaluation_figures(number_tokenizer):
    from transformer.data.builtin_task import english_number, german_number
    from transformer.data.collation import collate_pairs

    tok = number_tokenizer
    model = Transformer(ModelConfig.tiny(tok.vocab_size))
    numbers = [21, 345, 7, 1000]
    pairs = [(tok.encode(english_number(n)), tok.encode(german_number(n))) for n in numbers]
    task = TranslationTask(tgt_tokenizer=tok, valid_batches=[collate_pairs(pairs)],
                           bleu_sources=[p[0] for p in pairs],
                           bleu_references=[german_number(n) for n in numbers])
    model.train()
    result = task.evaluate(model)
    assert model.training  # the mode is restored
    assert set(result) == {"loss", "nll", "ppl", "bleu", "chrf", "exact_match"}
    assert result["loss"] > 0 and result["ppl"] == pytest.approx(torch.tensor(result["nll"]).exp().item())
    assert 0 <= result["bleu"] <= 100 and 0 <= result["exact_match"] <= 1

    # perfect translations score 100 and 1
    references = ["dreihundert fünf und vierzig", "sieben", "ein tausend", "neun und neunzig"]
    task = TranslationTask(tgt_tokenizer=tok, bleu_sources=[[5]] * 4, bleu_references=references,
                           metric="exact_match")
    task.translate = lambda model, sources: list(references)
    result = task.evaluate(model)
    assert result["bleu"] == pytest.approx(100) and result["exact_match"] == 1.0
    assert "loss" not in result and task.metric == "exact_match"


def test_validation_reports_only_the_chosen_metrics(number_tokenizer):
    references = ["dreihundertfünfundvierzig", "sieben"]
    task = TranslationTask(tgt_tokenizer=number_tokenizer, bleu_sources=[[5]] * 2,
                           bleu_references=references, metric="exact_match",
                           metrics=("exact_match", "chrf"))
    task.translate = lambda model, sources: list(references)
    result = task.evaluate(Transformer(ModelConfig.tiny(number_tokenizer.vocab_size)))
    assert set(result) == {"exact_match", "chrf"} and result["exact_match"] == 1.0


def test_no_validation_data_means_no_evaluation(synth):
    assert TranslationTask().evaluate(synth.tiny_model()) is None


def test_bad_task_arguments():
    with pytest.raises(ValueError, match="metric"):
        TranslationTask(metric="rouge")
    with pytest.raises(ValueError, match="metrics"):
        TranslationTask(metric="bleu", metrics=("chrf",))
    with pytest.raises(ValueError, match="references"):
        TranslationTask(bleu_sources=[[4]], bleu_references=[])
    with pytest.raises(ValueError, match="tgt_tokenizer"):
        TranslationTask(bleu_sources=[[4]], bleu_references=["x"])
