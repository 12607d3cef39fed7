"""The translation :class:`~transformer.training.task.Task`: teacher-forced label-smoothed
cross-entropy, and validation by loss and by greedy translations scored with sacreBLEU.

Shapes: B batch, S source length, T target length, V target vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from transformer.config.choices import TRANSLATION_METRICS
from transformer.config.decoding import MAX_LEN_A, MAX_LEN_B, DecodeOptions
from transformer.data.batch_types import Batch
from transformer.inference.translator import Translator
from transformer.training.loss import label_smoothed_cross_entropy


class TranslationTask:
    """Teacher-forced label-smoothed cross-entropy; validation loss and greedy sacreBLEU.

    ``valid_batches`` give the validation loss (label-smoothed, as in training, plus ``nll`` and
    ``ppl`` without smoothing). ``bleu_sources`` (source ids) and ``bleu_references`` (plain text)
    are the validation sample that is translated greedily and scored with sacreBLEU; the
    evaluation also reports chrF and ``exact_match``, the share of hypotheses equal to their
    reference. ``metric`` (one of those three) selects the best model; BLEU by default, but
    exact match for one-word targets such as the number task, where BLEU has no 4-grams to count.
    ``metrics`` (which must hold ``metric``) are the scores validation reports: the number task
    leaves BLEU out, as it is 0 whatever the model does.
    """

    higher_is_better = True

    def __init__(
        self,
        *,
        metric: str = "bleu",
        metrics: Sequence[str] = TRANSLATION_METRICS,
        tgt_tokenizer: Any = None,
        valid_batches: Sequence[Batch] = (),
        bleu_sources: Sequence[Sequence[int]] = (),
        bleu_references: Sequence[str] = (),
        label_smoothing: float = 0.1,
        pad_id: int = 0,
        bos_id: int = 2,
        eos_id: int = 3,
        decode_batch_size: int = 64,
        max_len_a: float = MAX_LEN_A,
        max_len_b: int = MAX_LEN_B,
    ) -> None:
        if len(bleu_sources) != len(bleu_references):
            raise ValueError(
                f"{len(bleu_sources)} BLEU sources but {len(bleu_references)} references"
            )
        if bleu_sources and tgt_tokenizer is None:
            raise ValueError("a tgt_tokenizer is needed to score BLEU")
        if metric not in TRANSLATION_METRICS:
            raise ValueError(f"metric must be one of {TRANSLATION_METRICS}, got {metric!r}")
        if set(metrics) - set(TRANSLATION_METRICS) or metric not in metrics:
            raise ValueError(f"metrics must be among {TRANSLATION_METRICS} and hold metric "
                             f"{metric!r}, got {tuple(metrics)}")
        self.metric = metric
        self.metrics = tuple(metrics)
        self.tgt_tokenizer = tgt_tokenizer
        self.valid_batches = list(valid_batches)
        self.bleu_sources = [list(s) for s in bleu_sources]
        self.bleu_references = list(bleu_references)
        self.label_smoothing = label_smoothing
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.decode_batch_size = decode_batch_size
        self.max_len_a, self.max_len_b = max_len_a, max_len_b

    def loss(self, model: nn.Module, batch: Batch) -> Tensor:
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        return label_smoothed_cross_entropy(
            logits, batch.tgt_out, smoothing=self.label_smoothing, ignore_index=self.pad_id
        )

    def normaliser(self, batch: Batch) -> int:
        return batch.num_tgt_tokens

    def num_tokens(self, batch: Batch) -> int:
        return batch.num_src_tokens + batch.num_tgt_tokens

    def translate_ids(self, model: nn.Module, sources: Sequence[Sequence[int]]) -> list[list[int]]:
        """Greedy translations (target ids without BOS/EOS) of source id lists, in input order.

        One translator (its decoder packs the weights once for all batches) per call: training
        changes the weights before the next validation, so nothing packed is kept between calls.
        """
        translator = Translator(
            model, None, self.tgt_tokenizer, bos_id=self.bos_id, eos_id=self.eos_id,
            options=DecodeOptions(beam_size=1, max_len_a=self.max_len_a, max_len_b=self.max_len_b),
            batch_size=self.decode_batch_size,
        )
        return translator.translate_ids(sources)

    def translate(self, model: nn.Module, sources: Sequence[Sequence[int]]) -> list[str]:
        """Greedy translations of source id lists, detokenized."""
        return [self.tgt_tokenizer.decode(h) for h in self.translate_ids(model, sources)]

    @torch.inference_mode()
    def evaluate(self, model: nn.Module) -> dict[str, float] | None:
        if not self.valid_batches and not self.bleu_sources:
            return None
        was_training = model.training
        model.eval()
        try:
            result: dict[str, float] = {}
            if self.valid_batches:
                device = next(model.parameters()).device
                smoothed = nll = 0.0
                count = 0
                for batch in self.valid_batches:
                    batch = batch.to(device)
                    logits = model(batch.src, batch.tgt_in)  # (B, T, V)
                    smoothed += float(label_smoothed_cross_entropy(
                        logits, batch.tgt_out, smoothing=self.label_smoothing,
                        ignore_index=self.pad_id))
                    nll += float(label_smoothed_cross_entropy(
                        logits, batch.tgt_out, smoothing=0.0, ignore_index=self.pad_id))
                    count += batch.num_tgt_tokens
                count = max(count, 1)
                result.update(loss=smoothed / count, nll=nll / count,
                              ppl=math.exp(min(nll / count, 50.0)))
            if self.bleu_sources:
                import sacrebleu

                hyps = self.translate(model, self.bleu_sources)
                if "bleu" in self.metrics:
                    result["bleu"] = sacrebleu.corpus_bleu(hyps, [self.bleu_references]).score
                if "chrf" in self.metrics:
                    result["chrf"] = sacrebleu.corpus_chrf(hyps, [self.bleu_references]).score
                if "exact_match" in self.metrics:
                    same = sum(h.strip() == r.strip() for h, r in zip(hyps, self.bleu_references, strict=True))
                    result["exact_match"] = same / len(hyps)
            return result
        finally:
            model.train(was_training)
