"""Translation scores with sacreBLEU: BLEU, chrF and TER on detokenized text, with their signatures.

Scores are computed on plain (detokenized) text as sacreBLEU intends, so they are comparable
across systems; the signature says exactly how (tokenizer, casing, smoothing, version). With BLEU we
also report BLEU on lowercased text with the 13a tokenizer (``bleu_lc``), close to the "tokenized,
case-insensitive BLEU" that many papers quote. TER (translation edit rate, lower is better) is
sacreBLEU's default: case-insensitive, tercom tokenization.

    scores = score_translations(hypotheses, references, metrics=("bleu", "chrf", "ter"))
    scores.ter, scores.to_dict()["ter_signature"]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER

from transformer.config.choices import DEFAULT_SCORE_METRICS, SCORE_METRICS


@dataclass(frozen=True)
class TranslationScores:
    """Corpus-level scores of hypotheses against one reference each (0-100); a metric not asked
    for is None (and left out of :meth:`to_dict` and :meth:`summary`)."""

    bleu: float | None
    bleu_signature: str | None
    chrf: float | None
    chrf_signature: str | None
    bleu_lc: float | None  # lowercased text, 13a tokenizer
    bleu_lc_signature: str | None
    bleu_detail: str | None  # sacreBLEU's one-line summary: n-gram precisions, brevity penalty, lengths
    sentences: int
    ter: float | None = None  # edits per reference word, in percent: lower is better
    ter_signature: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The scores computed (fields of metrics not asked for are left out) and ``sentences``."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    def summary(self) -> str:
        """One line per score computed, with its signature: BLEU, chrF, lowercased BLEU, TER."""
        lines = []
        if self.bleu is not None:
            lines.append(f"BLEU  {self.bleu:6.2f}  {self.bleu_signature}")
        if self.chrf is not None:
            lines.append(f"chrF  {self.chrf:6.2f}  {self.chrf_signature}")
        if self.bleu_lc is not None:
            lines.append(f"BLEU (lowercased, 13a) {self.bleu_lc:6.2f}  {self.bleu_lc_signature}")
        if self.ter is not None:
            lines.append(f"TER   {self.ter:6.2f}  {self.ter_signature}")
        return "\n".join(lines)


def check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    """``metrics`` as a tuple without repeats; ValueError naming one that is not in
    :data:`~transformer.config.choices.SCORE_METRICS`, or for none at all."""
    chosen = tuple(dict.fromkeys(metrics))
    if not chosen:
        raise ValueError(f"no metric to score with; choose from {', '.join(SCORE_METRICS)}")
    for name in chosen:
        if name not in SCORE_METRICS:
            raise ValueError(f"unknown metric {name!r}; choose from {', '.join(SCORE_METRICS)}")
    return chosen


def score_translations(hypotheses: Sequence[str], references: Sequence[str], *,
                       metrics: Sequence[str] = DEFAULT_SCORE_METRICS) -> TranslationScores:
    """Score ``hypotheses`` against ``references`` (one reference per hypothesis, same order) with
    ``metrics`` (any of bleu, chrf, ter; ``bleu`` brings the lowercased BLEU too).

    Both are sequences of detokenized sentences; raises ValueError when their counts differ or a
    metric is unknown.
    """
    hyps, refs = list(hypotheses), list(references)
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    chosen = check_metrics(metrics)
    found: dict[str, Any] = {"sentences": len(hyps)}
    if "bleu" in chosen:
        bleu, bleu_lc = BLEU(), BLEU(tokenize="13a", lowercase=True)
        bleu_score = bleu.corpus_score(hyps, [refs])
        found.update(bleu=bleu_score.score, bleu_signature=str(bleu.get_signature()),
                     bleu_lc=bleu_lc.corpus_score(hyps, [refs]).score,
                     bleu_lc_signature=str(bleu_lc.get_signature()), bleu_detail=str(bleu_score))
    if "chrf" in chosen:
        chrf = CHRF()
        found.update(chrf=chrf.corpus_score(hyps, [refs]).score,
                     chrf_signature=str(chrf.get_signature()))
    if "ter" in chosen:
        ter = TER()
        found.update(ter=ter.corpus_score(hyps, [refs]).score,
                     ter_signature=str(ter.get_signature()))
    empty = dict.fromkeys(("bleu", "bleu_signature", "chrf", "chrf_signature", "bleu_lc",
                           "bleu_lc_signature", "bleu_detail"))
    return TranslationScores(**{**empty, **found})
