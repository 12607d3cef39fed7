"""``prepare --tags``: each corpus's source rows start with its tag's one id, the tag a piece of its
own in the trained tokenizer; the manifest and the key record the tags; bad tags are refused in
one line naming ``--tags``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from transformer.data.prepared.directory import PreparedData
from transformer.data.prepared.prepare import prepare
from transformer.data.prepared.request import PrepareRequest
from transformer.errors import InputError

TAGS = [">>de<<", ">>xx<<"]


def lines(path: str) -> list[str]:
    return [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()]


def test_each_corpus_source_row_starts_with_its_tag_id(files, tmp_path):
    out = tmp_path / "data"
    prepare(PrepareRequest(train=[files["a"], files["b"]], valid=[files["v"], files["v"]],
                           tags=TAGS, vocab_size=60, byte_fallback=False, workers=1, out=str(out)))
    data = PreparedData.open(out)
    src, _ = data.tokenizers()
    ids = [src.piece_to_id(tag) for tag in TAGS]
    assert [src.id_to_piece(i) for i in ids] == TAGS  # pieces of their own
    assert ids[0] in src.encode(f"{TAGS[0]} a man")  # never split by the tokenizer
    for split in ("train", "valid"):
        for corpus, tag_id in zip(data.corpora(split), ids, strict=True):
            firsts = {corpus.src[i].tolist()[0] for i in range(len(corpus))}
            assert firsts == {tag_id}
    # the first kept pair of corpus a: the tag's id, then the sentence
    a = data.corpora("train")[0]
    first = next(s for s, t in zip(lines(files["a"][0]), lines(files["a"][1]), strict=True) if s and t)
    assert a.src[0].tolist() == [ids[0], *src.encode(first)]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tags"] == TAGS and manifest["request"]["tags"] == TAGS
    assert [c["tag"] for c in manifest["splits"]["train"]] == TAGS


def test_untagged_prepare_has_no_tags_and_tags_change_the_key(files, tokenizer, tmp_path):
    _, run = tokenizer
    out = tmp_path / "data"
    plain = prepare(PrepareRequest(train=[files["a"]], tokenizer_from=run, workers=1, out=str(out)))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tags"] is None and "tag" not in manifest["splits"]["train"][0]
    # the run's tokenizer lacks the piece: refused, naming --tags and the piece
    with pytest.raises(InputError, match=r"--tags >>de<<: .*no piece '>>de<<'"):
        prepare(PrepareRequest(train=[files["a"]], tokenizer_from=run, tags=[">>de<<"], workers=1,
                               out=str(out)))
    tagged = prepare(PrepareRequest(train=[files["a"]], tags=[">>de<<"], vocab_size=60,
                                    byte_fallback=False, workers=1, out=str(out)))
    assert not tagged["up_to_date"] and tagged["manifest_sha256"] != plain["manifest_sha256"]


def test_an_empty_tag_leaves_its_corpus_untagged(files, tmp_path):
    """Tagged back-translation: ``--tags ,<BT>`` tags the second corpus only, and the one
    validation corpus takes the first (empty) tag: untagged, as the test set will be."""
    out = tmp_path / "data"
    prepare(PrepareRequest(train=[files["a"], files["b"]], valid=[files["v"]], tags=["", "<BT>"],
                           vocab_size=60, byte_fallback=False, workers=1, out=str(out)))
    data = PreparedData.open(out)
    src, _ = data.tokenizers()
    bt = src.piece_to_id("<BT>")
    assert src.id_to_piece(bt) == "<BT>"
    (a, b), (v,) = data.corpora("train"), data.corpora("valid")
    first = next(s for s, t in zip(lines(files["a"][0]), lines(files["a"][1]), strict=True) if s and t)
    assert a.src[0].tolist() == src.encode(first)  # untagged: the sentence alone
    assert {b.src[i].tolist()[0] for i in range(len(b))} == {bt}
    assert all(bt not in corpus.src[i].tolist() for corpus in (a, v) for i in range(len(corpus)))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tags"] == ["", "<BT>"]


@pytest.mark.parametrize("tags, valid, named", [
    ("a,b,c", 0, "3 tags for 2 training corpora"),
    (",", 0, "no tag in the list"),
    (">>de<<,>>e n<<", 0, "holds whitespace"),
    (">>de<<,>>en<<", 3, "2 tags for 3 validation corpora"),
])
def test_bad_tags_are_one_line_naming_the_flag_and_value_exit_2(files, tmp_path, tags, valid, named):
    (a_src, a_tgt), (b_src, b_tgt) = files["a"], files["b"]
    argv = [sys.executable, "-m", "transformer", "prepare", "--train-src", f"{a_src},{b_src}",
            "--train-tgt", f"{a_tgt},{b_tgt}", f"--tags={tags}", "--vocab-size", "60",
            "--out", str(tmp_path / "data")]
    if valid:
        argv += ["--valid-src", ",".join([files["v"][0]] * valid),
                 "--valid-tgt", ",".join([files["v"][1]] * valid)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert f"--tags {tags!r}" in message and named in message
    assert not (tmp_path / "data").exists()
