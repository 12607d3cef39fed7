"""The prepared data directory: ids read back equal the tokenizer's encoding pair by pair, with
every drop and cut counted; the batch plan as arrays; weighted mixing; reruns and bad input."""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path

import numpy as np
import pytest

from transformer.data.collation import collate_pairs
from transformer.data.encoding import EncodedPairs
from transformer.data.epoch_batches import Epochs
from transformer.data.prepare import Filters, PrepareRequest, prepare
from transformer.data.prepared import (
    MixedEpochs,
    PreparedData,
    Shard,
    ShardWriter,
    id_dtype,
    mixture,
)
from transformer.data.token_batch_sampler import TokenBatchSampler
from transformer.data.tokenizer import Tokenizer
from transformer.errors import InputError

WORDS = ["a", "man", "is", "riding", "bike", "the", "dog", "runs", "on", "grass", "woman", "sings",
         "loud", "song", "in", "park"]
WORTE = ["ein", "mann", "fährt", "fahrrad", "der", "hund", "läuft", "auf", "gras", "frau", "singt",
         "laut", "lied", "im", "park"]


def sentence(rng: random.Random, words: list[str], n: int) -> str:
    return " ".join(rng.choice(words) for _ in range(n))


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Line pairs with the cases prepare must handle: empty sides, whitespace, long pairs,
    lopsided pairs and repeats."""
    rng = random.Random(seed)
    src, tgt = [], []
    for i in range(n):
        k = rng.randint(1, 9)
        s, t = sentence(rng, WORDS, k), sentence(rng, WORTE, k + rng.randint(-1, 1) or 1)
        if i % 17 == 3:
            s = ""
        elif i % 19 == 4:
            t = "   "
        elif i % 13 == 5:
            s = sentence(rng, WORDS, 30)  # long
        elif i % 11 == 6:
            t = sentence(rng, WORTE, 25)  # lopsided
        elif i % 7 == 0 and i:
            s, t = src[i - 7], tgt[i - 7]  # a repeat
        src.append(f"  {s} " if i % 5 == 1 else s)
        tgt.append(t)
    return src, tgt


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("text")
    out = {}
    for name, (n, seed) in {"a": (240, 1), "b": (90, 2), "v": (30, 3)}.items():
        src, tgt = corpus(n, seed)
        out[name] = (write(root / f"{name}.en", src), write(root / f"{name}.de", tgt))
    return out


@pytest.fixture(scope="module")
def tokenizer(files):
    texts = [line.strip() for name in ("a", "b") for path in files[name]
             for line in Path(path).read_text(encoding="utf-8").splitlines()]
    tok = Tokenizer.train(texts, vocab_size=60, byte_fallback=False)
    run = Path(files["a"][0]).parent / "run"
    from transformer.data.tokenizer_pair import save_tokenizers

    save_tokenizers(tok, tok, run / "tokenizer")
    return tok, str(run)


def expected(paths, tok, filters: Filters | None, seen: set):
    """The kept pairs' ids and the counts, by a plain reading of the rules (the reference)."""
    src_lines = Path(paths[0]).read_text(encoding="utf-8").split("\n")[:-1]
    tgt_lines = Path(paths[1]).read_text(encoding="utf-8").split("\n")[:-1]
    kept, dropped, truncated = [], dict.fromkeys(("empty", "empty_encoded", "max_len", "ratio", "dedup"), 0), 0
    for s, t in zip(src_lines, tgt_lines, strict=True):
        s, t = s.strip(), t.strip()
        if not s or not t:
            dropped["empty"] += 1
            continue
        a, b = tok.encode(s), tok.encode(t)
        if not a or not b:
            dropped["empty_encoded"] += 1
            continue
        if filters is not None:
            if filters.max_len and max(len(a), len(b)) > filters.max_len:
                dropped["max_len"] += 1
                continue
            if filters.ratio and max(len(a), len(b)) > filters.ratio * min(len(a), len(b)):
                dropped["ratio"] += 1
                continue
            if filters.truncate and max(len(a), len(b)) > filters.truncate:
                truncated += 1
                a, b = a[: filters.truncate], b[: filters.truncate]
            if filters.dedup:
                if (s, t) in seen:
                    dropped["dedup"] += 1
                    continue
                seen.add((s, t))
        kept.append((a, b, t))
    return kept, dropped, truncated


def read_back(data: PreparedData, split: str):
    return [[(c.src[i].tolist(), c.tgt[i].tolist()) for i in range(len(c))] for c in data.corpora(split)]


@pytest.mark.parametrize("workers", [1, 2])
def test_ids_read_back_equal_the_tokenizers_encoding_pair_by_pair(files, tokenizer, tmp_path, workers):
    tok, run = tokenizer
    filters = Filters.parse("max-len=20,ratio=2.5,dedup,truncate=12")
    out = tmp_path / "data"
    summary = prepare(PrepareRequest(train=[files["a"], files["b"]], valid=[files["v"]],
                                     tokenizer_from=run, filters=filters, workers=workers,
                                     out=str(out)))
    data = PreparedData.open(out)
    assert data.manifest["id_dtype"] == "<u2"
    assert data.corpora("train")[0].src.ids.dtype == np.uint16
    seen: set = set()
    for k, name in enumerate(("a", "b")):
        kept, dropped, truncated = expected(files[name], tok, filters, seen)
        info = data.manifest["splits"]["train"][k]
        assert read_back(data, "train")[k] == [(a, b) for a, b, _ in kept]
        assert info["dropped"] == dropped and info["truncated"] == truncated
        assert info["lines"] == len(Path(files[name][0]).read_text().splitlines())
        assert dropped["empty"] and dropped["max_len"] and dropped["ratio"] and truncated
    assert data.manifest["splits"]["train"][1]["dropped"]["dedup"]  # b repeats itself and a
    # validation loses only empty pairs, and keeps its references' text
    kept, dropped, truncated = expected(files["v"], tok, None, set())
    assert read_back(data, "valid")[0] == [(a, b) for a, b, _ in kept]
    assert data.references("valid") == [t for _, _, t in kept]
    assert data.manifest["splits"]["valid"][0]["dropped"] == dropped
    assert summary["train_pairs"] == sum(len(c) for c in data.corpora("train"))


def test_the_manifest_records_inputs_tokenizer_filters_and_weights(files, tokenizer, tmp_path):
    _, run = tokenizer
    out = tmp_path / "data"
    prepare(PrepareRequest(train=[files["a"], files["b"]], weights=[1, 3], tokenizer_from=run,
                           filters=Filters.parse("dedup"), workers=1, out=str(out),
                           command=["transformer", "prepare", "..."]))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["weights"] == [1.0, 3.0]
    assert manifest["command"] == ["transformer", "prepare", "..."]
    import hashlib

    for entry in manifest["inputs"]:
        data = Path(entry["path"]).read_bytes()
        assert entry["size"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert {(e["corpus"], e["side"]) for e in manifest["inputs"]} == {(0, "src"), (0, "tgt"),
                                                                     (1, "src"), (1, "tgt")}
    assert manifest["filters"]["dedup"] is True
    assert len(manifest["tokenizer"]["folder_sha256"]) == 64


def test_a_trained_tokenizer_comes_from_a_sample_and_is_saved(files, tmp_path):
    out = tmp_path / "data"
    prepare(PrepareRequest(train=[files["a"]], vocab_size=40, tokenizer_sample=50, workers=1,
                           out=str(out), byte_fallback=False))
    data = PreparedData.open(out)
    src, tgt = data.tokenizers()
    assert src is tgt and src.vocab_size == 40
    assert data.manifest["tokenizer"]["sampled_sentences"] == 50
    c = data.corpora("train")[0]
    first = Path(files["a"][0]).read_text().splitlines()[0].strip()
    assert c.src[0].tolist() == src.encode(first)


def test_ids_of_a_vocabulary_of_65536_or_more_are_uint32(tmp_path):
    assert id_dtype(65535) == np.uint16 and id_dtype(65536) == np.uint32
    writer = ShardWriter(tmp_path, "src", id_dtype(70000))
    rows = [[70000, 5], [], [65536, 1, 2]]
    writer.append(np.array([i for r in rows for i in r]), np.array([len(r) for r in rows]))
    writer.close()
    shard = Shard(tmp_path, "src", rows=3, tokens=5, dtype=id_dtype(70000))
    assert [shard[i].tolist() for i in range(3)] == rows


def test_a_rerun_on_unchanged_inputs_does_nothing_and_a_change_prepares_again(files, tokenizer, tmp_path, caplog):
    _, run = tokenizer
    out = tmp_path / "data"
    request = PrepareRequest(train=[files["a"]], tokenizer_from=run, workers=1, out=str(out))
    first = prepare(request)
    ids = out / "train" / "c0" / "src.ids"
    stamp = ids.stat().st_mtime_ns, ids.stat().st_ino
    caplog.clear()
    caplog.set_level(logging.INFO)
    again = prepare(request)
    assert again["up_to_date"] and not first["up_to_date"]
    assert (ids.stat().st_mtime_ns, ids.stat().st_ino) == stamp
    assert any("up to date" in r.message for r in caplog.records)
    # another filter: prepared again
    changed = prepare(PrepareRequest(train=[files["a"]], tokenizer_from=run, workers=1, out=str(out),
                                     filters=Filters.parse("max-len=5")))
    assert not changed["up_to_date"] and changed["train_pairs"] < first["train_pairs"]
    assert changed["manifest_sha256"] != first["manifest_sha256"]


def leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("data"))


@pytest.mark.parametrize("case", ["missing", "unequal", "weights-count", "weights-zero", "nothing-left",
                                  "bad-utf8"])
def test_bad_inputs_are_one_line_and_leave_nothing_behind(files, tokenizer, tmp_path, case):
    _, run = tokenizer
    src, tgt = files["a"]
    short = write(tmp_path / "short.de", Path(tgt).read_text().splitlines()[:100])
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"fine\n\xff\xfe broken\n" + b"x\n" * 238)
    request = {
        "missing": dict(train=[(src, str(tmp_path / "nope.de"))]),
        "unequal": dict(train=[(src, short)]),
        "weights-count": dict(train=[(src, tgt)], weights=[1, 2]),
        "weights-zero": dict(train=[(src, tgt), files["b"]], weights=[1, 0]),
        "nothing-left": dict(train=[(write(tmp_path / "long.en", ["a man is riding"] * 3),
                                     write(tmp_path / "long.de", ["ein mann fährt"] * 3))],
                             filters=Filters.parse("max-len=1")),
        "bad-utf8": dict(train=[(str(bad), tgt)]),
    }[case]
    with pytest.raises(InputError) as err:
        prepare(PrepareRequest(**request, tokenizer_from=run, workers=1, out=str(tmp_path / "data")))
    message = str(err.value)
    assert "\n" not in message
    named = {"missing": "nope.de", "unequal": "short.de ends at line 100", "weights-count": "--weights",
             "weights-zero": "--weights", "nothing-left": "max_len", "bad-utf8": "bad.en, line 2"}[case]
    assert named in message
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("text", ["max-len=0", "ratio=0.5", "ratio=x", "dedup=1", "sort", "truncate=-3"])
def test_bad_filters_name_the_item(text):
    with pytest.raises(InputError, match=text.split(",")[0].replace(".", r"\.")):
        Filters.parse(text)


def test_the_array_plan_is_the_samplers_batches_rank_by_rank():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, size=(500, 2))
    for world in (1, 2, 3):
        for rank in range(world):
            sampler = TokenBatchSampler(lengths, max_tokens=120, seed=5, rank=rank, world_size=world)
            for epoch in (0, 3):
                sampler.set_epoch(epoch)
                indices, bounds = sampler.plan()
                batches = [indices[bounds[j]:bounds[j + 1]].tolist() for j in range(len(bounds) - 1)]
                assert batches == list(sampler)
    # repeated batches (more ranks than batches can be split into) are planned too
    tiny = TokenBatchSampler([(3, 3)] * 3, max_tokens=4, world_size=2, rank=1)
    indices, bounds = tiny.plan()
    assert [indices[bounds[j]:bounds[j + 1]].tolist() for j in range(len(bounds) - 1)] == list(tiny)


def opened(files, tokenizer, tmp_path, weights=None):
    _, run = tokenizer
    out = tmp_path / "data"
    prepare(PrepareRequest(train=[files["a"], files["b"]], weights=weights, tokenizer_from=run,
                           workers=1, out=str(out)))
    return PreparedData.open(out)


def test_without_weights_the_epochs_are_those_of_the_in_memory_path(files, tokenizer, tmp_path):
    data = opened(files, tokenizer, tmp_path)
    pairs = data.pairs("train", max_len=8, on_long="truncate")
    whole = data.pairs("train", max_len=10_000)
    # cut as encode_pairs cuts: the source to max_len, the target to max_len - 1 (BOS/EOS)
    assert [pairs[i] for i in range(len(pairs))] == [(s[:8], t[:7]) for s, t in whole]
    assert pairs.num_truncated == sum(len(s) > 8 or len(t) > 7 for s, t in whole) > 0
    assert pairs.lengths.tolist() == [[len(s), len(t)] for s, t in pairs]
    memory = EncodedPairs([pairs[i] for i in range(len(pairs))], max_len=8)
    assert all(max(len(s), len(t) + 1) <= 8 for s, t in memory)
    for rank in range(2):
        ours = MixedEpochs(pairs, weights=None, collate=collate_pairs, max_tokens=64, seed=2,
                           rank=rank, world_size=2)
        theirs = Epochs(memory, widths=memory.lengths, collate=collate_pairs, max_tokens=64, seed=2,
                        rank=rank, world_size=2)
        for epoch in (0, 1):
            a, b = ours.for_epoch(epoch), theirs.for_epoch(epoch)
            assert len(a) == len(b)
            for x, y in zip(a, b, strict=True):
                assert x.src.tolist() == y.src.tolist() and x.tgt_out.tolist() == y.tgt_out.tolist()


def test_filter_on_long_leaves_long_pairs_out(files, tokenizer, tmp_path):
    data = opened(files, tokenizer, tmp_path)
    whole = data.pairs("train", max_len=10_000)
    fitted = data.pairs("train", max_len=8, on_long="filter")
    long = sum(1 for i in range(len(whole)) if len(whole[i][0]) > 8 or len(whole[i][1]) > 7)
    assert fitted.num_filtered == long > 0 and len(fitted) == len(whole) - long
    assert all(len(fitted[i][0]) <= 8 and len(fitted[i][1]) <= 7 for i in range(len(fitted)))


def test_weighted_mixing_lands_within_2_percent_of_the_weights(files, tokenizer, tmp_path):
    data = opened(files, tokenizer, tmp_path, weights=[1, 3])
    pairs = data.pairs("train", max_len=32)
    sizes = pairs.sizes.tolist()
    assert sizes[0] > 2 * sizes[1]  # corpus b is the smaller: the weights turn the shares round
    epochs = MixedEpochs(pairs, weights=data.weights, collate=collate_pairs, max_tokens=64, seed=0)
    draws = []
    for epoch in range(3):
        indices, bounds = epochs.plan(epoch)
        share = np.bincount(pairs.corpus[indices], minlength=2) / len(indices)
        assert abs(share[1] - 0.75) < 0.02 and abs(share[0] - 0.25) < 0.02, share
        assert abs(len(indices) - len(pairs)) <= 1
        widths = pairs.widths[indices]
        assert all(int(widths[a:b].max()) * (b - a) <= 64 for a, b in zip(bounds[:-1], bounds[1:], strict=True))
        draws.append(np.sort(indices[pairs.corpus[indices] == 0]))
    assert not np.array_equal(draws[0], draws[1])  # the subsampled corpus draws anew each epoch
    np.testing.assert_array_equal(np.sort(epochs.plan(2)[0]), np.sort(epochs.plan(2)[0]))


def test_mixture_repeats_a_corpus_weighed_above_its_size():
    drawn = mixture([10, 4], [1, 1], seed=0, epoch=0)
    counts = np.bincount(drawn, minlength=14)
    assert len(drawn) == 14 and counts[:10].sum() == 7 and counts[10:].sum() == 7
    assert set(counts[10:].tolist()) <= {1, 2} and counts[:10].max() == 1
    assert mixture([10, 4], None, seed=0, epoch=0) is None


def test_a_damaged_directory_is_refused_in_one_line(files, tokenizer, tmp_path):
    data = opened(files, tokenizer, tmp_path)
    ids = data.root / "train" / "c0" / "tgt.ids"
    with open(ids, "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(InputError, match="tgt.ids"):
        PreparedData.open(data.root).corpora("train")
    with pytest.raises(InputError, match="not a prepared data directory"):
        PreparedData.open(tmp_path)
    # a prepare killed between its two renames: the previous copy, ROOT.old, is read
    old = data.root.with_name(data.root.name + ".old")
    os.rename(data.root, old)
    assert PreparedData.open(data.root).root == old
    os.rename(old, data.root)
    os.remove(data.root / "manifest.json")
    with pytest.raises(InputError, match="manifest.json"):
        PreparedData.open(data.root)
