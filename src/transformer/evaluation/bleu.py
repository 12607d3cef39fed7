"""Translation scores with sacreBLEU: BLEU and chrF on detokenized text, with their signatures.

Scores are computed on plain (detokenized) text as sacreBLEU intends, so they are comparable
across systems; the signature says exactly how (tokenizer, casing, smoothing, version). We also
report BLEU on lowercased text with the 13a tokenizer (``bleu_lc``), close to the "tokenized,
case-insensitive BLEU" that many papers quote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sacrebleu.metrics import BLEU, CHRF


@dataclass(frozen=True)
class TranslationScores:
    """Corpus-level scores of hypotheses against one reference each (0-100)."""

    bleu: float
    bleu_signature: str
    chrf: float
    chrf_signature: str
    bleu_lc: float  # lowercased text, 13a tokenizer
    bleu_lc_signature: str
    bleu_detail: str  # sacreBLEU's one-line summary: n-gram precisions, brevity penalty, lengths
    sentences: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """Three lines: BLEU, chrF and lowercased BLEU, each with its signature."""
        return (
            f"BLEU  {self.bleu:6.2f}  {self.bleu_signature}\n"
            f"chrF  {self.chrf:6.2f}  {self.chrf_signature}\n"
            f"BLEU (lowercased, 13a) {self.bleu_lc:6.2f}  {self.bleu_lc_signature}"
        )


def score_translations(hypotheses: Sequence[str], references: Sequence[str]) -> TranslationScores:
    """Score ``hypotheses`` against ``references`` (one reference per hypothesis, same order).

    Both are sequences of detokenized sentences; raises ValueError when their counts differ.
    """
    hyps, refs = list(hypotheses), list(references)
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    bleu, chrf, bleu_lc = BLEU(), CHRF(), BLEU(tokenize="13a", lowercase=True)
    bleu_score = bleu.corpus_score(hyps, [refs])
    return TranslationScores(
        bleu=bleu_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf=chrf.corpus_score(hyps, [refs]).score,
        chrf_signature=str(chrf.get_signature()),
        bleu_lc=bleu_lc.corpus_score(hyps, [refs]).score,
        bleu_lc_signature=str(bleu_lc.get_signature()),
        bleu_detail=str(bleu_score),
        sentences=len(hyps),
    )
