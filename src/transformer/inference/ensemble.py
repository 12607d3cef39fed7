"""Ensembles of translation models: several runs, or one run's last snapshots, decoding together.

    translator = load_ensemble_translator(["runs/a", "runs/b"], beam_size=4)   # two runs
    translator = load_ensemble_translator(["runs/m30k"], last=4)               # its last 4 snapshots
    translator.translate(["A man rides a horse."])

The members decode on our engine as one :class:`~transformer.decoding.ensemble.Ensemble` (the mean
of their log-softmaxes at each step; CTranslate2 has no ensembles). Runs must share their
tokenizers (the same SentencePiece model bytes, or the same vocabulary): the target side because
the log-probabilities are averaged token by token, the source side because one encoding of each
sentence feeds every member. The first run's record gives the languages and the run's decoding
limits; a snapshot ensemble's members are the weights in ``RUN_DIR/snapshots/`` (``train
--average-last N`` keeps them), newest last, beside the run's own record and tokenizers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer.config.decoding import FLAGS, OptionError, check_for_model
from transformer.errors import InputError
from transformer.inference.engines import CTRANSLATE2, check_engine
from transformer.inference.loader import _check_options, resolve_precision
from transformer.inference.translator import Translator
from transformer.model_dir.directory import LoadedModel, load_model_dir
from transformer.model_dir.snapshots import SNAPSHOT_DIR, list_snapshots

if TYPE_CHECKING:
    import torch


def ensemble_members(models: Sequence[str | Path], *, last: int | None = None,
                     device: str | torch.device = "cpu") -> list[LoadedModel]:
    """The members of an ensemble, read lazily (weights on first use): each of ``models``, or,
    with ``last``, the newest ``last`` snapshots of the one run in ``models``. InputError naming
    the flag and the directory for a classifier, tokenizers that differ, or too few snapshots."""
    if not models:
        raise InputError("an ensemble needs at least one --model")
    if last is not None:
        if len(models) != 1:
            raise InputError(f"--ensemble-last decodes the snapshots of one run, got {len(models)} --model")
        if last < 1:
            raise InputError(f"--ensemble-last must be at least 1, got {last}")
        run = Path(models[0])
        base = load_model_dir(run, device=device, lazy=True)
        _check_translation(base, run)
        snapshots = list_snapshots(run)
        if len(snapshots) < last:
            raise InputError(f"--ensemble-last {last}: {run / SNAPSHOT_DIR} holds {len(snapshots)} "
                             "snapshot(s) (train with --average-last N to keep the weights of the "
                             "last N evaluations)")
        return [dataclasses.replace(base, weights=path, _model=None, _stamp=None)
                for _, path in snapshots[-last:]]
    members = []
    for path in models:
        loaded = load_model_dir(path, device=device, lazy=True)
        _check_translation(loaded, Path(path))
        if members:
            first = members[0]
            for side, mine, theirs in (("target", loaded.tgt_tokenizer, first.tgt_tokenizer),
                                       ("source", loaded.src_tokenizer, first.src_tokenizer)):
                if mine != theirs:
                    raise InputError(f"--model {path}: its {side} tokenizer differs from that of "
                                     f"--model {models[0]} (an ensemble's members must share "
                                     "their tokenizers)")
        members.append(loaded)
    return members


def _check_translation(loaded: LoadedModel, path: Path) -> None:
    if loaded.tgt_tokenizer is None:
        raise InputError(f"--model {path} holds a classifier, not a translation model")


def load_ensemble_translator(models: Sequence[str | Path], *, last: int | None = None,
                             device: str | torch.device = "cpu", precision: str = "auto",
                             batch_size: int = 64, engine: str = "auto",
                             **options: Any) -> Translator:
    """A :class:`Translator` (ours) whose model is the :class:`~transformer.decoding.ensemble.Ensemble`
    of :func:`ensemble_members`. ``precision``, ``batch_size`` and the decoding ``options`` are
    :func:`~transformer.inference.loader.translator_for`'s (``auto`` precision is resolved on the
    first member, and the others follow it); ``engine``: ``auto`` and ``torch`` decode on ours,
    ``ctranslate2`` is refused. ``alignments`` is refused (they are read from one model's
    attention). InputError naming the flag or directory for any bad value."""
    from transformer.data.tokenizer import BOS_ID, EOS_ID
    from transformer.decoding.ensemble import Ensemble

    _check_options(batch_size, options, engine)
    check_engine(engine)
    if engine == CTRANSLATE2:
        raise InputError("--engine ctranslate2 decodes one model; an ensemble (--ensemble-last, "
                         "several --model) decodes on ours: --engine torch or auto")
    if options.get("alignments"):
        raise InputError("--alignments reads one model's attention; not with an ensemble")
    members = ensemble_members(models, last=last, device=device)
    first = members[0]
    runs = resolve_precision(first, precision)
    for member in members[1:]:
        resolve_precision(member, runs)  # bf16: cast like the first
    ensemble = Ensemble([m.model for m in members])
    try:
        decode = first.record.decode_options(**{k: v for k, v in options.items() if v is not None})
        check_for_model(decode, model_max_len=ensemble.config.max_len)
    except OptionError as err:
        raise InputError(err.named(FLAGS)) from None
    try:
        for decoder in ensemble.decoders(precision=runs):  # packed (or quantized) now, once
            if decoder is not None:
                decoder.steps()
    except ValueError as err:
        raise InputError(f"--precision {runs}: {err}") from None
    translator = Translator(ensemble, first.src_tokenizer, first.tgt_tokenizer, bos_id=BOS_ID,
                            eos_id=EOS_ID, options=decode, batch_size=batch_size, precision=runs,
                            record=first.record)
    translator.members = tuple(str(m.weights) for m in members)
    return translator
