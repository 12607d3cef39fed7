"""``transformer demo``: the whole job on the built-in task, on a CPU, in a couple of minutes.

English number words to German ones (``transformer.data.builtin_task``): train a small
Transformer, translate the test split greedily, report exact-match accuracy (and BLEU/chrF),
show a few translations beside their references and draw the cross-attention of one example.

Its configuration is the ``demo`` preset (``transformer.config.demo_config``; why those values:
``transformer.config.presets.DEMO_PRESET``).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from transformer.config.presets import demo_config
from transformer.config.runs import TranslationTrainConfig
from transformer.errors import InputError
from transformer.model_dir import CONFIG_FILE, load_model_dir, read_record
from transformer.training.run_lock import LOCK_FILE, hold_run_dir
from transformer.training.train_translation import train_translation

log = logging.getLogger(__name__)

def prepare_run_dir(run_dir: Path) -> None:
    """Clear an earlier demo run in ``run_dir``; refuse to touch a directory holding anything else."""
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: exists and is not a directory")
    if (run_dir / CONFIG_FILE).exists():
        try:
            is_demo = read_record(run_dir).demo is not None
        except InputError:
            is_demo = False
        if not is_demo:
            raise InputError(f"{run_dir} holds a model that is not a demo run; choose another --out")
    elif any(p.name != LOCK_FILE for p in run_dir.iterdir()):
        raise InputError(f"{run_dir} is not empty and not a demo run; choose another --out")
    for name in ("checkpoint", "checkpoint.old", "checkpoint.tmp", "metrics.jsonl", "attention.png"):
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def draw_example_attention(loaded: Any, text: str, path: Path) -> Path:
    """Head-averaged cross-attention of the last decoder layer for ``text``, saved at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    from transformer.visualization.figures import save_figure
    from transformer.visualization.sentence import draw_attention, sentence_attention

    att = sentence_attention(loaded, text)
    save_figure(draw_attention(att, "alignment"), path)
    return path


def run_demo(
    *,
    config: TranslationTrainConfig | None = None,
    run_dir: Path | str = "runs/demo",
    device: str = "auto",
    progress: bool = False,
    num_examples: int = 8,
) -> dict[str, Any]:
    """Train ``config`` (default: ``demo_config()``) on the number task into ``run_dir``, evaluate
    on its test split, draw attention.

    Returns a summary: training figures, test exact match / BLEU / chrF, ``num_examples``
    translations beside their references and the attention picture's path.
    """
    start = time.monotonic()
    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        return _run_demo(config=config, run_dir=run_dir, device=device, progress=progress,
                         num_examples=num_examples, start=start)


def _run_demo(*, config: TranslationTrainConfig | None, run_dir: Path, device: str, progress: bool,
              num_examples: int, start: float) -> dict[str, Any]:
    """:func:`run_demo` once the run directory's lock is held."""
    import sacrebleu

    from transformer.config.decoding import DecodeOptions
    from transformer.data.builtin_task import number_task_splits
    from transformer.inference.translator import Translator

    prepare_run_dir(run_dir)
    cfg = config if config is not None else demo_config()
    seed = cfg.seed
    splits = number_task_splits(seed)
    summary = train_translation(
        cfg, run_dir=run_dir, splits={"train": splits["train"], "valid": splits["valid"]},
        device=device, progress=progress,
        extra_config={"demo": {"task": "English number words -> German", "seed": seed}},
    )
    loaded = load_model_dir(run_dir, device=summary["device"])
    test = splits["test"]
    model = loaded.model
    src_ids = [ids[: model.config.max_len] for ids in loaded.src_tokenizer.encode_batch(test.src)]
    translator = Translator.from_loaded(loaded, batch_size=128, options=DecodeOptions(
        beam_size=1, max_len_a=cfg.decode_max_len_a, max_len_b=cfg.decode_max_len_b))
    with torch.inference_mode():
        hyp_ids = translator.translate_ids(src_ids)
    hyps = [loaded.tgt_tokenizer.decode(h) for h in hyp_ids]
    correct = [h.strip() == r.strip() for h, r in zip(hyps, test.tgt, strict=True)]
    examples = [
        {"source": s, "reference": r, "translation": h, "correct": c}
        for s, r, h, c in list(zip(test.src, test.tgt, hyps, correct, strict=True))[:num_examples]
    ]
    # the attention picture: the longest of the shown examples has the most to look at
    shown = max(examples, key=lambda e: len(e["source"]))
    picture = draw_example_attention(loaded, shown["source"], run_dir / "attention.png")
    return {
        **summary,
        "test": {
            "exact_match": sum(correct) / len(correct),
            "bleu": sacrebleu.corpus_bleu(hyps, [test.tgt]).score,
            "chrf": sacrebleu.corpus_chrf(hyps, [test.tgt]).score,
            "num_examples": len(correct),
        },
        "examples": examples,
        "attention": {"path": str(picture), "source": shown["source"]},
        "total_s": round(time.monotonic() - start, 2),
    }
