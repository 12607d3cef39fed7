"""Writing a prepared data directory: ids read back equal the tokenizer's encoding pair by pair,
with every drop and cut counted; the manifest; the tokenizer stage; reruns and bad input."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from transformer.data.prepared.directory import PreparedData
from transformer.data.prepared.prepare import prepare
from transformer.data.prepared.request import Filters, PrepareRequest
from transformer.errors import InputError


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


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
