"""The models a server holds: loaded at start (and again when their directory changes, see
:mod:`transformer.serving.reload`), each with its packed decoder and its own worker thread.
Requests name a model; they never name a path.

    served = load_served({"en-de": "runs/m30k"}, precision="fp32")
    served["en-de"].translate_batch([(["A dog."], options)])
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from transformer.config.decoding import DecodeOptions
from transformer.errors import InputError
from transformer.inference.classifier import Classifier
from transformer.inference.lines import LineTranslation, translate_lines
from transformer.inference.loader import classifier_for, translator_for
from transformer.inference.tags import target_langs
from transformer.inference.translator import Translator
from transformer.model_dir import (
    CONFIG_FILE,
    TOKENIZER_DIR,
    WEIGHTS_FILE,
    LoadedModel,
    load_model_dir,
)

log = logging.getLogger(__name__)
Fingerprint = tuple[tuple[str, int, int, int] | tuple[str], ...]


@dataclass
class ServedModel:
    """One loaded model directory: a translator (weights packed once) or a classifier."""

    name: str
    loaded: LoadedModel
    task: str
    precision: str = "fp32"
    engine: str = "torch"  # a translator's (a reload keeps it)
    translator: Translator | None = None
    classifier: Classifier | None = None
    path: str = ""  # the directory it was loaded from (never shown to clients)
    device: str = "cpu"
    fingerprint: Fingerprint = ()  # of the directory's files when loading began
    # one thread per model: a model is never used by two calls at once
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=1))

    @cached_property
    def language_tags(self) -> list[str]:
        """The ids of a multi-target translator's ``>>id<<`` source pieces ([] for none), read
        once (a reload makes a new ServedModel)."""
        return target_langs(self.translator.src_tokenizer) if self.translator is not None else []

    @property
    def max_tokens(self) -> int:
        """Longest source the model reads, in tokens (longer ones are cut)."""
        model = self.loaded.model
        return int(model.max_tokens if self.task == "classification" else model.config.max_len)

    def default_options(self, **changes: Any) -> DecodeOptions:
        """Decoding options: the run's length limits, the request's beam and the rest."""
        return self.loaded.record.decode_options(**changes)

    def count_tokens(self, texts: Sequence[str]) -> int:
        """Source tokens of ``texts`` (what the batch budget counts), each cut to the model's limit."""
        tok = self.loaded.src_tokenizer
        return sum(min(len(tok.encode(t)), self.max_tokens) for t in texts if t.strip())

    def translate_batch(self, payloads: Sequence[tuple[Any, ...]]) -> list[list[LineTranslation]]:
        """Several requests' texts decoded together: each payload is ``(texts, options)``,
        ``(texts, options, split)``, ``(texts, options, split, prefixes)`` or ``(texts, options,
        split, prefixes, tag)`` or ``(texts, options, split, prefixes, tag, constraints)`` (split
        into sentences by default: :func:`~transformer.inference.lines.translate_lines`;
        ``prefixes``: one target prefix per text; ``tag``: source ids put before every sentence;
        ``constraints``: target phrases per text, or None). Requests with equal options, split
        and tag share one translation call,
        whatever their prefixes; a text's random draws (sampling) follow its place in its own
        request, so that they do not depend on the batch. One list of translations per request,
        in order."""
        assert self.translator is not None
        groups: dict[tuple[DecodeOptions, bool, tuple[int, ...]], list[int]] = {}
        for i, (_, options, *rest) in enumerate(payloads):
            tag = tuple(rest[2]) if len(rest) > 2 else ()
            groups.setdefault((options, bool(rest[0]) if rest else True, tag), []).append(i)
        src_lang, tgt_lang = self.loaded.record.languages
        out: list[list[LineTranslation]] = [[] for _ in payloads]
        for (options, split, tag), members in groups.items():  # one translator, options per call
            texts = [t for i in members for t in payloads[i][0]]
            prefixes = [p for i in members for p in _prefixes_of(payloads[i])]
            keys = [k for i in members for k in range(len(payloads[i][0]))]
            phrases = [p for i in members for p in _constraints_of(payloads[i])]
            found = translate_lines(self.translator, texts, split=split, src_lang=src_lang,
                                    tgt_lang=tgt_lang, prefixes=prefixes, keys=keys,
                                    constraints=phrases if any(phrases) else None,
                                    options=options, source_prefix=tag)
            start = 0
            for i in members:
                n = len(payloads[i][0])
                out[i] = found[start : start + n]
                start += n
        return out

    def classify_batch(self, payloads: Sequence[list[str]]) -> list[list[dict[str, Any]]]:
        """Several requests' texts classified together; per request, one dict per text."""
        texts = [t for texts in payloads for t in texts]
        pred = self.classifier.predict(texts)
        rows, start = [], 0
        for texts_of_one in payloads:
            rows.append([
                {"labels": [{"label": name, "probability": p} for name, p in pred.labels(i)],
                 "probabilities": {n: float(p) for n, p in zip(pred.label_names, pred.probs[i], strict=True)}}
                for i in range(start, start + len(texts_of_one))])
            start += len(texts_of_one)
        return rows

    def thresholds(self) -> dict[str, float] | None:
        """The multi-label decision thresholds (None: single-label, the most probable label wins)."""
        from transformer.evaluation.label_metrics import DEFAULT_THRESHOLD

        clf = self.classifier
        if not clf.multi_label:
            return None
        values = clf.thresholds if clf.thresholds is not None else [DEFAULT_THRESHOLD] * len(clf.label_names)
        return {n: float(v) for n, v in zip(clf.label_names, values, strict=True)}

    def describe(self) -> dict[str, Any]:
        """What ``GET /v1/models`` says about this model."""
        record = self.loaded.record
        info: dict[str, Any] = {"name": self.name, "task": self.task, "max_tokens": self.max_tokens,
                                "parameters": sum(p.numel() for p in self.loaded.model.parameters()),
                                "precision": self.precision}
        if self.task == "translation":
            info["engine"] = self.translator.engine
            info["source_language"] = record.src_lang
            info["target_language"] = record.tgt_lang
            langs = target_langs(self.translator.src_tokenizer)
            if langs:  # a multi-target model: translate --target-lang ID
                info["target_langs"] = langs
            tags = record.data.get("tags")
            if tags:  # trained on data prepared with --tags: translate --tag TAG
                info["tags"] = [t for t in dict.fromkeys(tags) if t]  # "": an untagged corpus
        else:
            info["labels"] = list(self.classifier.label_names)
            info["multi_label"] = bool(self.classifier.multi_label)
        return info


def _prefixes_of(payload: tuple[Any, ...]) -> list[str | None]:
    """A payload's per-text target prefixes (None each: the options' own)."""
    texts = payload[0]
    return list(payload[3]) if len(payload) > 3 and payload[3] is not None else [None] * len(texts)


def _constraints_of(payload: tuple[Any, ...]) -> list[list[str]]:
    """A payload's per-text target phrases ([] each: none)."""
    texts = payload[0]
    return list(payload[5]) if len(payload) > 5 and payload[5] is not None else [[] for _ in texts]


def parse_model_specs(specs: Sequence[str]) -> dict[str, str]:
    """``[NAME=]RUN_DIR`` flags -> {name: path}; the name defaults to the directory's name."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec).name, spec
        if not name or not path:
            raise InputError(f"--model {spec!r}: expected [NAME=]RUN_DIR")
        if name in out:
            raise InputError(f"--model {spec!r}: the name {name!r} is given twice")
        out[name] = path
    return out


def fingerprint(run_dir: str | Path) -> Fingerprint:
    """What the loader reads in ``run_dir`` (config.json, model.safetensors, tokenizer/), as each
    file's (name, modification time in ns, size, inode): a file rewritten, replaced by a rename
    or removed changes it, without reading the weights. A missing file counts as ``(name,)``."""
    root = Path(run_dir)
    names = [CONFIG_FILE, WEIGHTS_FILE]
    tokenizers = root / TOKENIZER_DIR
    if tokenizers.is_dir():
        names += sorted(str(p.relative_to(root)) for p in tokenizers.rglob("*") if p.is_file())
    out: list[tuple[str, int, int, int] | tuple[str]] = []
    for name in names:
        try:
            stat = (root / name).stat()
        except OSError:
            out.append((name,))
            continue
        out.append((name, stat.st_mtime_ns, stat.st_size, stat.st_ino))
    return tuple(out)


def load_one(name: str, path: str, *, precision: str = "auto", engine: str = "auto",
             device: str | torch.device = "cpu") -> ServedModel:
    """Load the model directory ``path`` as the model ``name``, through the loader the verbs use
    (:mod:`transformer.inference.loader`; ``engine`` for a translator); InputError (naming the
    directory) for a bad one."""
    before = fingerprint(path)
    loaded = load_model_dir(path, device=device)
    one = ServedModel(name=name, loaded=loaded, task=loaded.task, path=str(path), device=str(device),
                      fingerprint=before)
    if loaded.record.is_translation:
        try:
            one.translator = translator_for(loaded, precision=precision, engine=engine)
        except InputError as err:
            raise InputError(f"{path}: {err}") from None
        one.precision = one.translator.precision
        one.engine = one.translator.engine
    else:
        one.classifier = classifier_for(loaded, precision=precision)
        one.precision = one.classifier.precision
    log.info("loaded %s (%s) from %s", name, loaded.task, path)
    return one


def load_served(models: Mapping[str, str], *, precision: str = "auto", engine: str = "auto",
                device: str | torch.device = "cpu") -> dict[str, ServedModel]:
    """Load every ``{name: run_dir}`` once (:func:`load_one`); InputError (naming the directory)
    for a bad one."""
    return {name: load_one(name, path, precision=precision, engine=engine, device=device)
            for name, path in models.items()}
