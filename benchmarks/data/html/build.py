"""Builds corpus.jsonl: HTML snippets made from Multi30k test_2016_flickr English sentences, for
the tests of ``translate --format html`` (tests/inference/test_html_corpus.py) and
benchmarks/translate_html.py.

    python benchmarks/data/html/build.py [--data ../shared/data] [--out benchmarks/data/html/corpus.jsonl]

Twelve kinds of snippet, 20 of each (sentences taken in order, words to tag drawn with a fixed
seed): an inline tag around a word, two tags, nested tags, a link with attributes, entities, a
script beside the text, inline code and a code block, ``translate="no"``, a list, an image with
``alt`` in a figure, a ``lang`` card with a line break and a comment, and a whole page. Each line
is ``{"id", "kind", "html", "sentences", "plain"}``: ``sentences`` are the texts of the snippet's
blocks as the model reads them (entities decoded), in order; ``plain`` says whether the text of
the answer, tags removed, must equal the plain translation of ``sentences`` (not where ``code`` or
``translate="no"`` leave words untranslated).
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import random
from pathlib import Path

KINDS = ("bold", "two", "nested", "link", "entities", "script", "code", "notranslate", "list",
         "image", "lang", "page")
PER_KIND = 20


def _tagged(words: list[str], k: int, open_: str, close: str) -> None:
    """Wrap word k's letters (not its trailing punctuation) in open_/close, in place."""
    word = words[k]
    core = word.rstrip(".,;:!?")
    words[k] = f"{open_}{html.escape(core, quote=False)}{close}{word[len(core):]}"


def _choose(words: list[str], rng: random.Random, count: int) -> list[int]:
    good = [k for k, w in enumerate(words) if len(w.rstrip(".,;:!?")) > 3]
    good = good or list(range(len(words)))
    return sorted(rng.sample(good, min(count, len(good))))


def _escaped(words: list[str], skip: set[int]) -> list[str]:
    return [w if k in skip else html.escape(w, quote=False) for k, w in enumerate(words)]


def snippet(kind: str, n: int, s1: str, s2: str, rng: random.Random) -> dict:
    w1, w2 = s1.split(), s2.split()
    plain = True
    if kind == "bold":
        (k,) = _choose(w1, rng, 1)
        w1 = _escaped(w1, {k})
        _tagged(w1, k, "<b>", "</b>")
        out, sentences = f"<p>{' '.join(w1)}</p>", [s1]
    elif kind == "two":
        a, b = _choose(w1, rng, 2) if len(w1) > 1 else (0, 0)
        w1 = _escaped(w1, {a, b})
        _tagged(w1, a, "<b>", "</b>")
        if b != a:
            _tagged(w1, b, "<i>", "</i>")
        out, sentences = f"<p>{' '.join(w1)}</p>", [s1]
    elif kind == "nested":
        k = min(_choose(w1, rng, 1)[0], len(w1) - 2) if len(w1) > 1 else 0
        w1 = _escaped(w1, set())
        inner = w1[k + 1] if k + 1 < len(w1) else ""
        core = inner.rstrip(".,;:!?")
        nested = f"<strong>{w1[k]} <em>{core}</em></strong>{inner[len(core):]}"
        out = " ".join([*w1[:k], nested, *w1[k + 2:]])
        out, sentences = f"<p>{out}</p>", [s1]
    elif kind == "link":
        k = min(_choose(w1, rng, 1)[0], len(w1) - 2) if len(w1) > 1 else 0
        w1 = _escaped(w1, set())
        link = (f'<a href="https://example.org/photos?id={n}&amp;size=large" title="Photo {n}" '
                f'target="_blank" rel="noopener">{w1[k]} {w1[k + 1]}</a>')
        out = " ".join([*w1[:k], link, *w1[k + 2:]])
        out, sentences = f'<p class="caption">{out}</p>', [s1]
    elif kind == "entities":
        (k,) = _choose(w1, rng, 1)
        escaped = _escaped(w1, {k})
        _tagged(escaped, k, "<sup>", "</sup>")
        text = " ".join(escaped).replace("'", "&#39;").replace('"', "&quot;")
        if len(w1) > 2:  # a non-breaking space between the first two words
            first = text.index(" ")
            text = text[:first] + "&nbsp;" + text[first + 1:]
        text = text[:-1] + "&#46;" if text.endswith(".") else text
        text += f" &mdash; &laquo;{html.escape(s2, quote=False)}&raquo; &amp; &copy;&nbsp;20&#x31;6"
        out, sentences = f"<p>{text}</p>", [html.unescape(text.replace("<sup>", "").replace("</sup>", ""))]
    elif kind == "script":
        (k,) = _choose(w1, rng, 1)
        w1 = _escaped(w1, {k})
        _tagged(w1, k, '<span class="hl">', "</span>")
        out = (f"<p>{' '.join(w1)}</p>\n<script>if (a < b && c) {{ document.title = "
               f"\"<b>{n}</b>\"; }}</script>")
        sentences = [s1]
    elif kind == "code":
        plain = False
        w1 = _escaped(w1, set())
        k = len(w1) // 2
        out = (f"<p>{' '.join(w1[:k])} <code>npm install --save</code> {' '.join(w1[k:])}</p>\n"
               f"<pre><code>for i in range({n}):\n    print(i &lt; 2)  # {html.escape(s2)}\n"
               f"</code></pre>")
        sentences = [s1]
    elif kind == "notranslate":
        plain = False
        w1 = _escaped(w1, set())
        out = (f"<p>{' '.join(w1)} <span translate=\"no\">Multi30k #{n}</span></p>\n"
               f"<div translate=\"no\"><p>{html.escape(s2)}</p></div>")
        sentences = [s1]
    elif kind == "list":
        (k,) = _choose(w2, rng, 1)
        w2 = _escaped(w2, {k})
        _tagged(w2, k, "<i>", "</i>")
        out = f"<ul>\n  <li>{html.escape(s1)}</li>\n  <li>{' '.join(w2)}</li>\n</ul>"
        sentences = [s1, s2]
    elif kind == "image":
        (k,) = _choose(w1, rng, 1)
        w1 = _escaped(w1, {k})
        _tagged(w1, k, "<mark>", "</mark>")
        out = (f'<figure><img src="photo-{n}.jpg" alt="{html.escape(s2)}" width="320">'
               f"<figcaption>{' '.join(w1)}</figcaption></figure>")
        sentences = [s1]
    elif kind == "lang":
        (k,) = _choose(w2, rng, 1)
        w2 = _escaped(w2, {k})
        _tagged(w2, k, "<sub>", "</sub>")
        cut = max(1, len(w2) // 2)
        out = (f'<div lang="en" class="card">\n  <h2>{html.escape(s1)}</h2>\n  <!-- card {n} -->\n'
               f"  <p>{' '.join(w2[:cut])}<br>\n{' '.join(w2[cut:])}</p>\n</div>")
        sentences = [s1, s2]
    else:  # page
        (k,) = _choose(w2, rng, 1)
        w2 = _escaped(w2, {k})
        _tagged(w2, k, "<b><i>", "</i></b>")
        out = ('<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
               f"<title>{html.escape(s1)}</title><style>p > b {{ color: #c00; }}</style></head>\n"
               f"<body>\n<p>{' '.join(w2)}</p>\n</body>\n</html>\n")
        sentences = [s1, s2]
    sentences = [" ".join(s.split()) for s in sentences]  # as the model reads them
    return {"id": n, "kind": kind, "html": out, "sentences": sentences, "plain": plain}


def main() -> None:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(here.parents[2].parent / "shared" / "data"))
    parser.add_argument("--out", default=str(here / "corpus.jsonl"))
    args = parser.parse_args()
    path = Path(args.data) / "multi30k" / "test_2016_flickr.en.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    rng = random.Random(59)
    rows = []
    for n in range(PER_KIND * len(KINDS)):
        s1, s2 = lines[2 * n].strip(), lines[2 * n + 1].strip()
        rows.append(snippet(KINDS[n % len(KINDS)], n, s1, s2, rng))
    Path(args.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                              encoding="utf-8")
    print(f"wrote {len(rows)} snippets to {args.out}")


if __name__ == "__main__":
    main()
