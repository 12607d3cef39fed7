"""Two gloo ranks over one prepared directory: together they see every pair of an epoch exactly
once (with weights: every drawn pair once), each with as many batches as the other."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from transformer.data.prepared.directory import PreparedData
from transformer.data.prepared.prepare import prepare
from transformer.data.prepared.request import PrepareRequest

WORKER = Path(__file__).parent / "mixing_ddp_worker.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(data_dir: Path, out: Path, world_size: int = 2) -> dict:
    port = free_port()
    procs = []
    for rank in range(world_size):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(data_dir), str(out)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    try:
        for p in procs:
            output, _ = p.communicate(timeout=120)
            assert p.returncode == 0, output.decode()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return json.loads(out.read_text())


def lines(path: Path, n: int, seed: int, lang: str) -> str:
    words = {"en": ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"],
             "de": ["eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn"]}[lang]
    text = [" ".join(words[(i * 7 + j * seed) % 10] for j in range(1 + (i * seed) % 9)) + f" {i}"
            for i in range(n)]
    path.write_text("".join(t + "\n" for t in text), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("weights", [None, [1, 4]])
def test_two_gloo_ranks_see_every_pair_once_per_epoch(tmp_path, weights):
    corpora = [(lines(tmp_path / f"{k}.en", n, k + 2, "en"), lines(tmp_path / f"{k}.de", n, k + 2, "de"))
               for k, n in enumerate((301, 57))]
    data_dir = tmp_path / "data"
    prepare(PrepareRequest(train=corpora, weights=weights, vocab_size=40, byte_fallback=False,
                           workers=1, out=str(data_dir)))
    total = len(PreparedData.open(data_dir).pairs("train", max_len=64))
    result = run_ranks(data_dir, tmp_path / "seen.json")
    ranks = result["ranks"]
    assert result["world_size"] == 2
    for epoch in ("0", "1", "2"):
        a, b = ranks[0][epoch], ranks[1][epoch]
        assert a["batches"] == b["batches"] > 0
        assert a["drawn"] == b["drawn"]  # the ranks draw the same pairs
        seen = Counter(a["indices"]) + Counter(b["indices"])
        assert seen == Counter(a["drawn"])  # each drawn pair on exactly one rank, once
        if weights is None:
            assert sorted(seen) == list(range(total)) and set(seen.values()) == {1}
        else:
            assert sum(seen.values()) == total and max(seen.values()) > 1  # the small corpus repeats
