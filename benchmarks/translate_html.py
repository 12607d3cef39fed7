"""HTML translation: speed against the same sentences as plain text, and where the inline tags
land against a reference alignment.

    python benchmarks/translate_html.py --model RUN_DIR [--threads 1] [--beam 4] [--repeat 3]

Speed: the 240 snippets of benchmarks/data/html/corpus.jsonl through ``translate_html_batch``
(one call), against ``translate_lines`` over the same texts (each snippet's runs of text and its
``title``/``alt`` values), same translator, engine and options, one thread; the best of
``--repeat`` alternating runs of each; sentences/s counts the sentences each path translated.

Placement (with eflomal installed, ``pip install 'transformer[bench]'``): the silver reference
is eflomal's alignment (Östling and Tiedemann, 2016) of each run of text with its translation,
trained on those pairs and Multi30k's training split together, lowercased whitespace words, in
both directions, their union (benchmarks/alignment_gold.py: ``eflomal_links``). An inline element
lands when the target words it wraps span exactly the target words the reference aligns to the
source words it wrapped (first to last); it overlaps when it wraps at least one of them. Elements
whose words the reference leaves unaligned are counted apart. The same flows are placed again
with the reference's own links as the alignment (each target word to its first linked source
word): the gap between the two is what the model's alignments cost, the rest is the rule's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import describe, require_model  # noqa: E402

CORPUS = ROOT / "benchmarks" / "data" / "html" / "corpus.jsonl"


def plain_texts(documents: list[str]) -> list[str]:
    """What the HTML path translates, as plain lines: each run of text with words (its words one
    space apart) and each title and alt value."""
    from transformer.inference.html_parse import TRANSLATED_ATTRIBUTES, Flow, parse_html

    out = []
    for d in documents:
        doc = parse_html(d)
        out.extend(" ".join(p.text.split()) for p in doc.parts if isinstance(p, Flow) and p.has_words)
        out.extend(v for t in doc.attributes for k, v in t.attrs
                   if k in TRANSLATED_ATTRIBUTES and v and v.strip())
    return out


def speed(translator, documents: list[str], *, repeat: int) -> dict:
    from transformer.inference.html import translate_html_batch
    from transformer.inference.lines import translate_lines

    src, tgt = translator.record.languages
    texts = plain_texts(documents)
    best = {"plain": float("inf"), "html": float("inf")}
    counts = {}
    translate_lines(translator, texts[:8], src_lang=src, tgt_lang=tgt)  # warm-up
    for _ in range(repeat):
        start = time.perf_counter()
        plain = translate_lines(translator, texts, src_lang=src, tgt_lang=tgt, log_probs=False)
        best["plain"] = min(best["plain"], time.perf_counter() - start)
        start = time.perf_counter()
        found = translate_html_batch(translator, documents)
        best["html"] = min(best["html"], time.perf_counter() - start)
        counts = {"plain": sum(t.sentences for t in plain), "html": sum(t.sentences for t in found)}
    rates = {k: counts[k] / best[k] for k in best}
    return {"documents": len(documents), "sentences": counts, "seconds": best,
            "sentences_per_s": rates, "ratio": rates["html"] / rates["plain"]}


def _hull(words) -> tuple[int, int] | None:
    return (min(words), max(words)) if words else None


def placement(translator, documents: list[str], data: Path) -> dict:
    from alignment_gold import eflomal_links
    from transformer.inference.html import translate_html_batch
    from transformer.inference.html_parse import Flow, parse_html
    from transformer.inference.html_tags import project

    found = translate_html_batch(translator, documents)
    flows = [(p, doc.elements) for d in documents for doc in [parse_html(d)]
             for p in doc.parts if isinstance(p, Flow) and p.has_words and (p.units or any(p.stacks))]
    aligned = [row for t in found for row in t.aligned]
    assert len(flows) == len(aligned)
    with gzip.open(data / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as f:
        train_src = f.read().splitlines()
    with gzip.open(data / "multi30k" / "train.de.gz", "rt", encoding="utf-8") as f:
        train_tgt = f.read().splitlines()
    sources, targets = [a for a, _, _ in aligned], [b for _, b, _ in aligned]
    keep = range(len(train_src), len(train_src) + len(sources))
    silver = eflomal_links(train_src + sources, train_tgt + targets, keep=keep)
    tally = {"ours": {"landed": 0, "overlap": 0}, "reference_alignment": {"landed": 0, "overlap": 0}}
    scored = unaligned = 0
    for (flow, elements), (_, translation, pairs), (_, possible) in zip(flows, aligned, silver, strict=True):
        ref_pairs = sorted({(i, j) for i, j in possible}, key=lambda p: (p[1], p[0]))
        first = {}
        for i, j in ref_pairs:
            first.setdefault(j, i)
        oracle = project(flow, elements, translation, [(i, j) for j, i in first.items()],
                         open_tag=lambda t: t.raw, unit_markup=lambda u: "")
        ours = project(flow, elements, translation, pairs, open_tag=lambda t: t.raw,
                       unit_markup=lambda u: "")
        for (_, words, placed), (_, _, oracle_placed) in zip(ours.placements, oracle.placements, strict=True):
            if not words:
                continue
            want = {j for i, j in possible if i in words}
            if not want:
                unaligned += 1
                continue
            scored += 1
            for name, got in (("ours", placed), ("reference_alignment", oracle_placed)):
                tally[name]["landed"] += _hull(got) == _hull(want)
                tally[name]["overlap"] += bool(set(got) & want)
    shares = {name: {k: v / max(scored, 1) for k, v in t.items()} for name, t in tally.items()}
    return {"reference": "eflomal, Multi30k train + these pairs, lowercased, union of both directions",
            "elements_scored": scored, "elements_unaligned_in_reference": unaligned,
            "shares": shares, "split_elements": sum(t.split for t in found),
            "empty_elements": sum(t.empty for t in found),
            "elements": sum(t.elements for t in found)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a translation model directory (en-de)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TRANSFORMER_DATA", ROOT.parent / "shared" / "data")), help="the shared data folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the run's)")
    parser.add_argument("--engine", default="torch", choices=("torch", "ctranslate2", "auto"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-placement", action="store_true", help="speed only (no eflomal)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "translate_html.json")
    args = parser.parse_args(argv)
    require_model(args.model, script="translate_html.py")
    torch.set_num_threads(args.threads)
    from transformer.inference.loader import load_translator

    options = {} if args.beam is None else {"beam_size": args.beam}
    translator = load_translator(args.model, precision="fp32", engine=args.engine, **options)
    documents = [json.loads(line)["html"] for line in args.corpus.read_text(encoding="utf-8").splitlines()]
    results = {"machine": describe(), "command": " ".join(["benchmarks/translate_html.py", *sys.argv[1:]]),
               "model": args.model, "engine": translator.engine,
               "beam": translator.options.beam_size, "threads": args.threads,
               "speed": speed(translator, documents, repeat=args.repeat)}
    s = results["speed"]
    print(f"{'path':<8} {'sentences':>10} {'seconds':>9} {'sent/s':>8}")
    for k in ("plain", "html"):
        print(f"{k:<8} {s['sentences'][k]:>10} {s['seconds'][k]:>9.2f} {s['sentences_per_s'][k]:>8.1f}")
    print(f"html / plain: {s['ratio']:.3f}  ({translator.engine}, beam {translator.options.beam_size}, "
          f"{args.threads} thread(s), {results['machine']['cpu_name']})")
    if not args.no_placement:
        results["placement"] = p = placement(translator, documents, args.data)
        print(f"\nplacement against {p['reference']}: {p['elements_scored']} elements scored "
              f"({p['elements_unaligned_in_reference']} unaligned in the reference)")
        print(f"{'alignment':<22} {'landed':>7} {'overlap':>8}")
        for name, share in p["shares"].items():
            print(f"{name:<22} {share['landed']:>7.3f} {share['overlap']:>8.3f}")
        print(f"split elements: {p['split_elements']} of {p['elements']}; written empty: "
              f"{p['empty_elements']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
