"""The repetition guards and the target prefix against Hugging Face ``generate``
(``no_repeat_ngram_size``, ``repetition_penalty``, ``decoder_input_ids``) on the same trained model
exported with ``export huggingface``: the same tokens, greedy and beam."""

from __future__ import annotations

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.convert import export_huggingface
from transformer.decoding import beam_search, greedy_decode
from transformer.model_dir import save_model_dir

transformers = pytest.importorskip("transformers")

PAD, BOS, EOS = 0, 2, 3
LIMIT = 16  # tokens a translation may have, EOS included (HF: max_length = 1 + LIMIT)


def repeating_pairs(g: torch.Generator, count: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A copy task whose sources repeat a short pattern ("a b a b a"), so that a model trained on
    it repeats n-grams, which the guards then forbid or penalise."""
    src = torch.full((count, 12), PAD, dtype=torch.long)
    tgt = torch.full((count, 14), PAD, dtype=torch.long)
    for i in range(count):
        pattern = torch.randint(4, vocab, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g)
        words = pattern.repeat(4)[: int(torch.randint(3, 11, (1,), generator=g))]
        src[i, : len(words)] = words
        tgt[i, 0], tgt[i, 1 : 1 + len(words)], tgt[i, 1 + len(words)] = BOS, words, EOS
    return src, tgt


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tokenizer):
    """(our trained model, Hugging Face's MarianMTModel of it, test sources)."""
    torch.manual_seed(0)
    vocab = tokenizer.vocab_size
    model = Transformer(ModelConfig.tiny(vocab, dropout=0.0, max_len=48, share_embeddings=True))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        src, tgt = repeating_pairs(g, 32, vocab)
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt[:, 1:].reshape(-1),
                                                 ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    path = tmp_path_factory.mktemp("steer")
    save_model_dir(path / "run", model, config={}, src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    export_huggingface(path / "run", path / "hf")
    hf = transformers.MarianMTModel.from_pretrained(path / "hf").eval()
    return model, hf, repeating_pairs(torch.Generator().manual_seed(1), 8, vocab)[0]


def generate(hf, row: torch.Tensor, prefix: list[int], **options) -> list[int]:
    """Hugging Face's output for one source row: the tokens after the decoder start, to EOS."""
    src = row[row != PAD][None]
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=torch.ones_like(src),
                          decoder_input_ids=torch.tensor([[BOS, *prefix]]), max_length=1 + LIMIT,
                          do_sample=False, forced_eos_token_id=None, early_stopping=False,
                          **options)[0].tolist()[1:]
    return out[: out.index(EOS)] if EOS in out else out


GUARDS = [  # (ours, Hugging Face's)
    ({}, {}),
    (dict(no_repeat_ngram=2), dict(no_repeat_ngram_size=2)),
    (dict(repetition_penalty=1.5), dict(repetition_penalty=1.5)),
    (dict(no_repeat_ngram=3, repetition_penalty=1.3), dict(no_repeat_ngram_size=3, repetition_penalty=1.3)),
]


def cases():
    """Every guard with and without a prefix, greedy and beam; the fast suite runs both guards
    with a prefix (greedy and beam) and plain beam search, the slow suite all of them."""
    fast = {("both", True, 1), ("both", True, 3), ("plain", False, 3)}
    for name, (ours, theirs) in zip(["plain", "ngram", "penalty", "both"], GUARDS, strict=True):
        for with_prefix in (False, True):
            for beam in (1, 3):
                marks = () if (name, with_prefix, beam) in fast else (pytest.mark.slow,)
                yield pytest.param(beam, with_prefix, ours, theirs, marks=marks,
                                   id=f"{name}-{'prefix' if with_prefix else 'none'}-beam{beam}")


@pytest.mark.parametrize("beam, with_prefix, ours, theirs", list(cases()))
def test_same_tokens_as_hugging_face(exported, beam, with_prefix, ours, theirs):
    model, hf, src = exported
    prefixes = [row[row != PAD][: i % 3].tolist() if with_prefix else [] for i, row in enumerate(src)]
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=LIMIT, prefixes=prefixes, **ours)
    if beam == 1:
        got = greedy_decode(model, src, **kw)
    else:  # length penalty 0 in both: Hugging Face's penalty is not GNMT's
        got = beam_search(model, src, beam_size=beam, length_penalty=0.0, **kw)
    want = [generate(hf, row, prefix, num_beams=beam, length_penalty=0.0, **theirs)
            for row, prefix in zip(src, prefixes, strict=True)]
    assert got == want
    if ours or with_prefix:  # the option changed the output, so the agreement means something
        plain = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=LIMIT)
        assert sum(a != b for a, b in zip(got, plain, strict=True)) >= 3
