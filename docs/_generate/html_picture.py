"""docs/translate-html.png: a small page beside its translation, as Chromium draws them.

    PYTHONPATH=src python docs/_generate/html_picture.py --model RUN_DIR [--browser chromium]

RUN_DIR is an English-German translation model (the picture in the docs: a Multi30k run of
``transformer train --preset multi30k-cpu``). The page is translated with
``transformer.inference.html.translate_html``, both are put side by side in one page, and the
browser's headless screenshot of it is written.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
PAGE = """<h2>A day at the park</h2>
<p>A <b>young</b> boy in a <i>red</i> shirt is playing with a <a href="https://example.org/dog"
title="A brown dog">brown dog</a>.</p>
<p>Two women are sitting on a <em>bench</em> and the man runs <code>--fast</code> in the snow.</p>
<ul><li>A man is riding a <strong>bicycle</strong>.</li>
<li>People walk down the <span translate="no">Main Street</span> street.</li></ul>"""
FRAME = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {{ font: 17px/1.45 sans-serif; margin: 0; display: flex; gap: 0; }}
section {{ flex: 1; padding: 6px 22px; }} section + section {{ border-left: 2px solid #ccc; }}
h1 {{ font-size: 13px; color: #777; text-transform: uppercase; letter-spacing: .08em; }}
h2 {{ margin: 4px 0; }} a {{ color: #0645ad; }} code {{ background: #eee; padding: 0 3px; }}
b, strong {{ color: #b00; }} em, i {{ color: #070; }}
</style></head><body><section><h1>English</h1>{source}</section>
<section><h1>Deutsch (translate --format html)</h1>{target}</section></body></html>"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--browser", default="chromium")
    parser.add_argument("--out", type=Path, default=DOCS / "translate-html.png")
    args = parser.parse_args(argv)
    from transformer.inference import load_translator
    from transformer.inference.html import translate_html

    translated = translate_html(load_translator(args.model, precision="fp32"), PAGE).html
    print(translated)
    browser = shutil.which(args.browser)
    if browser is None:
        print(f"html_picture.py: no {args.browser} on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "side-by-side.html"
        page.write_text(FRAME.format(source=PAGE, target=translated), encoding="utf-8")
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={args.out}", "--window-size=1100,330", page.as_uri()],
                       check=True, capture_output=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
