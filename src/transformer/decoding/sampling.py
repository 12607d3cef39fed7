"""Sampling: each next token drawn from the model's distribution, after a temperature and the
top-k and top-p (nucleus) cuts, as Hugging Face ``generate(do_sample=True)`` defines them.

Shapes: B sentences, K samples per sentence, R rows being decoded, L the most steps, V target
vocabulary, C candidate tokens.

The definitions (transformers' ``TemperatureLogitsWarper``, ``TopKLogitsWarper``,
``TopPLogitsWarper``, applied in that order to the logits after the repetition guards):

- temperature T: the logits divided by T;
- top-k K: every token whose logit is below the K-th largest is cut (ties with it are kept, so
  top-k 1 is greedy decoding but where the best logits tie exactly, as bf16 logits often do);
- top-p P: the tokens sorted by probability (after top-k), every token is cut whose probability
  together with those of all less probable tokens is at most 1 - P: what is kept is the fewest
  most probable tokens whose probabilities sum to at least P (Holtzman et al., 2020);
- the token is drawn from the softmax of what is left. PAD is never drawn (it is no word).

Draws repeat exactly: every sentence has its own stream of uniform numbers, made from the seed and
the sentence's key (its place in the input) alone, so a sentence's samples do not depend on which
other sentences share its batch, nor on the batch size (up to the float rounding of the model's
own logits, which may differ by a last bit between batch shapes). A token is drawn from its
uniform number u by inverting the cumulative distribution: the first token whose cumulative
weight exceeds u times the total. Without a cut that runs in two rounds over chunks of the
vocabulary (:func:`~transformer.decoding.ranking.vocabulary_chunk`), so that a step costs about one
pass over the logits, as greedy decoding's argmax does; with a cut, the draw is among the
candidates the cut leaves (a top-k of them; for top-p alone the 64 most probable tokens, or all
sorted when those do not reach P).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

# top-p alone looks for its nucleus among this many most probable tokens first (a full sort of a
# large vocabulary costs many times one pass over it); rows whose nucleus is larger are sorted
TOPP_CANDIDATES = 64
LOG2E = 1.0 / math.log(2.0)


def top_k_cut(scores: Tensor, k: int) -> Tensor:
    """``scores`` (R, V) with -inf for every token below the ``k``-th largest of its row (Hugging
    Face's ``TopKLogitsWarper``); ``k`` 0 or at least V: unchanged. The reference definition."""
    if k <= 0 or k >= scores.size(-1):
        return scores
    kth = scores.topk(k, dim=-1).values[:, -1:]  # (R, 1)
    return scores.masked_fill(scores < kth, -math.inf)


def top_p_cut(scores: Tensor, p: float) -> Tensor:
    """``scores`` (R, V) with -inf for every token whose probability, added to those of all less
    probable tokens (ascending order), is at most ``1 - p`` (Hugging Face's ``TopPLogitsWarper``;
    the most probable token is always kept); ``p`` 1: unchanged. The reference definition."""
    if p >= 1.0:
        return scores
    ascending, order = scores.sort(dim=-1)
    cut = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - p  # (R, V)
    cut[:, -1] = False
    return scores.masked_fill(cut.scatter(1, order, cut), -math.inf)


def sentence_seed(seed: int, key: object) -> int:
    """The seed of one sentence's stream: a hash of ``seed`` and the sentence's ``key`` (its
    place in the input), so that neighbouring sentences get unrelated streams."""
    digest = hashlib.blake2b(f"{seed}/{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # torch.Generator.manual_seed takes < 2**63


def uniform_streams(keys: Sequence[object], *, seed: int, samples: int, steps: Sequence[int],
                    device: torch.device | str = "cpu") -> Tensor:
    """One uniform number in [0, 1) per sample and step of each sentence: (B * K, L) float64, row
    ``b * K + k`` for sample k of the sentence of ``keys[b]``. Sentence b's numbers come from its
    own generator (:func:`sentence_seed`) and fill its ``steps[b]`` steps (its own length limit,
    which does not depend on the batch); L is the largest of them."""
    out = torch.zeros(len(keys) * samples, max(steps, default=1), dtype=torch.float64)
    for b, (key, length) in enumerate(zip(keys, steps, strict=True)):
        generator = torch.Generator().manual_seed(sentence_seed(seed, key))
        out[b * samples : (b + 1) * samples, :length] = torch.rand(
            (samples, length), generator=generator, dtype=torch.float64)
    return out.to(device)


@dataclass(frozen=True)
class Sampler:
    """How each next token is drawn: ``temperature``, ``top_k`` (0: no cut) and ``top_p`` (1: no
    cut), as the module says; ``chunk`` divides V (None: one round over the vocabulary)."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    chunk: int | None = None

    @property
    def plain(self) -> bool:
        """Whether it draws from the distribution as it is (no temperature, no cut)."""
        return self.temperature == 1.0 and self.top_k == 0 and self.top_p >= 1.0

    def draw_plain(self, scores: Tensor, uniforms: Tensor) -> tuple[Tensor, Tensor]:
        """A :attr:`plain` sampler's :meth:`draw`, and the log-sum-exp of each row of ``scores``
        (R,) float64, which the draw computes on the way (the normaliser of a log-softmax)."""
        assert self.plain
        return self._full(scores.float(), uniforms, with_total=True)  # type: ignore[return-value]

    def draw(self, scores: Tensor, uniforms: Tensor) -> Tensor:
        """One token per row of ``scores`` (R, V) (logits after the guards; -inf: never), drawn
        with ``uniforms`` (R,) float64 in [0, 1): (R,) long."""
        scores = scores.float()
        v, t, k = scores.size(-1), self.temperature, self.top_k
        if 0 < k < v:  # the temperature keeps the order: scale only the candidates
            values, ids = scores.topk(k + 1, dim=-1)  # (R, K + 1) best first
            values = values / t if t != 1.0 else values
            if bool((values[:, k] == values[:, k - 1]).any()):  # ties with the k-th are kept
                return self._full(top_p_cut(top_k_cut(scores / t, k), self.top_p), uniforms)
            values, ids = values[:, :k], ids[:, :k]
            return self._among(values, ids, self._nucleus(values, values.logsumexp(-1)), uniforms)
        if self.top_p < 1.0:
            values, ids = scores.topk(min(TOPP_CANDIDATES, v), dim=-1)  # (R, C) best first
            scaled = scores / t if t != 1.0 else scores
            values = values / t if t != 1.0 else values
            keep = self._nucleus(values, scaled.logsumexp(-1))
            if v > values.size(1) and bool(keep[:, -1].any()):  # some nucleus may reach past C
                return self._full(top_p_cut(scaled, self.top_p), uniforms)
            return self._among(values, ids, keep, uniforms)
        return self._full(scores, uniforms, temperature=t)

    def _nucleus(self, values: Tensor, total: Tensor) -> Tensor:
        """Which of the candidates ``values`` (R, C), best first, top-p keeps (R, C) bool: a
        candidate is kept while the probability of those before it is below P, which is
        top_p_cut's rule read from the top. ``total``: the log-sum-exp of the row (R,)."""
        if self.top_p >= 1.0:
            return torch.ones_like(values, dtype=torch.bool)
        probs = (values - total[:, None]).exp()  # (R, C)
        before = probs.cumsum(-1) - probs  # (R, C): the mass of the more probable candidates
        keep = before < self.top_p
        keep[:, 0] = True
        return keep

    @staticmethod
    def _among(values: Tensor, ids: Tensor, keep: Tensor, uniforms: Tensor) -> Tensor:
        """Draw among candidates ``values``/``ids`` (R, C), best first, those ``keep`` (R, C)
        marks (a prefix of each row)."""
        weights = (values - values[:, :1]).exp().masked_fill(~keep, 0.0).double()  # (R, C)
        return ids.gather(1, _inverse_cdf(weights.cumsum(-1), uniforms)[:, None]).squeeze(1)

    def _full(self, scores: Tensor, uniforms: Tensor, *, temperature: float = 1.0,
              with_total: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Draw from the whole vocabulary ``scores`` (R, V) at ``temperature``: the chunk by
        chunk sums first, then the token within the chosen chunk. ``with_total``: also return
        the log-sum-exp of the scaled scores (R,) float64."""
        r, v = scores.shape
        # exp((x - max) / T) as 2 ** (x * c - max * c), c = log2(e) / T: one pass and one in
        # place (PyTorch's CPU exp2 is some 3x faster than its exp)
        c = LOG2E / temperature
        largest = scores.amax(-1, keepdim=True)  # (R, 1)
        weights = torch.add(largest * -c, scores, alpha=c).exp2_()  # (R, V)
        chunk = self.chunk if self.chunk is not None and v % self.chunk == 0 else v
        grouped = weights.view(r, v // chunk, chunk)  # (R, M, chunk)
        sums = grouped.sum(-1).double()  # (R, M)
        cumulative = sums.cumsum(-1)  # (R, M)
        target = _below(uniforms * cumulative[:, -1], cumulative[:, -1])  # (R,)
        which = torch.searchsorted(cumulative, target[:, None], right=True).squeeze(1)  # (R,) chunk
        within = grouped.gather(1, which.view(r, 1, 1).expand(r, 1, chunk)).squeeze(1).double().cumsum(-1)  # (R, chunk)
        before = cumulative.gather(1, which[:, None]).squeeze(1) - sums.gather(1, which[:, None]).squeeze(1)
        rest = _below((target - before).clamp(min=0.0), within[:, -1])  # (R,)
        drawn = which * chunk + torch.searchsorted(within, rest[:, None], right=True).squeeze(1)
        if not with_total:
            return drawn
        return drawn, largest.squeeze(1).double() / temperature + cumulative[:, -1].log()


def _below(target: Tensor, total: Tensor) -> Tensor:
    """``target`` (R,), kept below ``total`` (R,): rounding can make ``u * total`` reach the total,
    and the first cumulative weight above it must be a positive weight's."""
    return torch.minimum(target, torch.nextafter(total, torch.zeros_like(total)))


def _inverse_cdf(cumulative: Tensor, uniforms: Tensor) -> Tensor:
    """The first position of each row of ``cumulative`` (R, C), non-decreasing, whose value
    exceeds ``uniforms`` (R,) times the row's total: (R,) long, always a position of positive
    weight."""
    total = cumulative[:, -1]
    target = _below(uniforms * total, total)[:, None]  # (R, 1)
    return torch.searchsorted(cumulative, target, right=True).squeeze(1)
