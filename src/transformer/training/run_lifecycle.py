"""One run's lifecycle, the same for both training tasks (translation and classification):

- **start**: refuse a model already in the run directory, or with ``overwrite`` clear what the
  run there wrote, then train from the start;
- **resume**: read the run's record once, check it is a run of this task with a checkpoint, take
  its configuration with the fields that may change on resume (``RESUME_FIELDS``) changed, and
  continue it exactly;
- **auto** (``--resume auto``): resume when the directory holds a checkpoint of this
  configuration, else start (replacing a run of the same configuration killed before its first
  checkpoint); anything else is refused naming the first field that differs.

Each holds the run directory's lock throughout. The task's own stages come from its
:class:`Recipe`: ``start(cfg)`` trains from the start, ``resume(cfg, record)`` continues the
run whose record is ``record`` (and ``check_same_data`` refuses an auto-resume on other data).
Under ``torchrun`` every rank goes through the same steps (the checks read the same files).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from transformer.config.runs import RESUME_FIELDS, ClassifierTrainConfig, TranslationTrainConfig
from transformer.errors import InputError
from transformer.model_dir import CONFIG_FILE, RunRecord, read_record
from transformer.training.checkpoint import has_checkpoint
from transformer.training.run_lock import hold_run_dir
from transformer.training.tensorboard import TENSORBOARD_DIR

TrainConfigs = TranslationTrainConfig | ClassifierTrainConfig

# what a start with ``overwrite`` clears: the files a run writes besides the model directory's
# (which the new run writes over at its start)
RUN_OUTPUTS = ("checkpoint", "checkpoint.old", "checkpoint.tmp", "snapshots", "metrics.jsonl",
               "results.json", TENSORBOARD_DIR)


@dataclass(frozen=True)
class RunKind:
    """A kind of run: ``task`` (config.json's), its configuration's class, and for messages the
    command that resumes it and its ``noun``."""

    task: str
    config_type: type[TranslationTrainConfig] | type[ClassifierTrainConfig]
    command: str
    noun: str

    def is_run(self, record: RunRecord) -> bool:
        """Whether ``record`` is a run of this kind (with a training configuration)."""
        return record.task == self.task and bool(record.training) and (
            self.task != "classification" or record.classifier is not None)


TRANSLATION = RunKind("translation", TranslationTrainConfig, "train", "translation")
CLASSIFICATION = RunKind("classification", ClassifierTrainConfig, "classify train", "classifier")


class Recipe(Protocol):
    """A task's stages, as the lifecycle calls them (the run directory, device and the rest are
    the recipe's own)."""

    kind: RunKind
    run_dir: Path
    init_from: Path | str | None

    def start(self, cfg: Any) -> dict[str, Any]:
        """Train ``cfg`` from the start; return the run's summary."""
        ...

    def resume(self, cfg: Any, record: RunRecord) -> dict[str, Any]:
        """Continue the run whose record is ``record`` with ``cfg``; return its summary."""
        ...

    def check_same_data(self, record: RunRecord) -> None:
        """InputError when the data the recipe was given is not what ``record``'s run trained on
        (a translation run's data is its configuration's: nothing to check)."""
        ...


def start_run(recipe: Recipe, cfg: Any, *, overwrite: bool = False) -> dict[str, Any]:
    """Hold the run directory's lock, refuse (or with ``overwrite`` clear) a model already there,
    then ``recipe.start(cfg)``."""
    with hold_run_dir(recipe.run_dir):
        return _start(recipe, cfg, overwrite=overwrite)


def _start(recipe: Recipe, cfg: Any, *, overwrite: bool) -> dict[str, Any]:
    run_dir = recipe.run_dir
    if recipe.init_from is not None and Path(recipe.init_from).resolve() == run_dir.resolve():
        raise InputError(f"{run_dir}: --init-from and --out are the same directory; fine-tune "
                         "into another one")
    if (run_dir / CONFIG_FILE).exists() and not overwrite:
        raise InputError(f"{run_dir} already holds a model; pass --overwrite to replace it or "
                         f"{recipe.kind.command} --resume {run_dir} to continue it")
    if overwrite:
        for name in RUN_OUTPUTS:
            path = run_dir / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    return recipe.start(cfg)


def resume_run(recipe: Recipe, **stop: Any) -> dict[str, Any]:
    """Hold the run directory's lock and continue its run exactly: its stored configuration with
    ``stop``'s fields (of ``RESUME_FIELDS``; None: unchanged) changed."""
    bad = sorted(set(stop) - set(RESUME_FIELDS))
    if bad:
        raise ValueError(f"only {', '.join(RESUME_FIELDS)} can change on resume, not {', '.join(bad)}")
    with hold_run_dir(recipe.run_dir):
        record = resumable(recipe.kind, recipe.run_dir)
        cfg = stored_config(recipe.kind, record)
        # a new budget the run's settings cannot take (a cool-down longer than max_steps) is the
        # caller's fault, not the file's: a ValueError naming the field (the command line's flag)
        cfg = cfg.replace(**{k: v for k, v in stop.items() if v is not None})
        return recipe.resume(cfg, record)


def start_or_resume(recipe: Recipe, cfg: Any) -> dict[str, Any]:
    """``--resume auto``: hold the lock; resume the run directory when it holds a checkpoint of
    ``cfg``'s run (on the same data, from the same ``init_from``), else start it (replacing a run
    of the same configuration killed before its first checkpoint)."""
    run_dir = recipe.run_dir
    with hold_run_dir(run_dir):
        if not (run_dir / CONFIG_FILE).exists():
            return _start(recipe, cfg, overwrite=False)
        record = read_record(run_dir)
        check_same_run(recipe.kind, cfg, record)
        check_same_origin(recipe.init_from, record)
        recipe.check_same_data(record)
        if has_checkpoint(run_dir):
            return recipe.resume(cfg, record)
        return _start(recipe, cfg, overwrite=True)


def resumable(kind: RunKind, run_dir: Path) -> RunRecord:
    """The record of the run in ``run_dir``, read once: InputError unless it is a run of ``kind``
    with a checkpoint to resume from."""
    record = read_record(run_dir)
    if not kind.is_run(record):
        other = next(k for k in (TRANSLATION, CLASSIFICATION) if k is not kind)
        raise InputError(f"{run_dir / CONFIG_FILE}: not a {kind.noun} run that can be resumed "
                         f"(a {other.noun} run resumes with {other.command} --resume)")
    if not has_checkpoint(run_dir):
        raise InputError(f"{run_dir / 'checkpoint'}: no checkpoint to resume from")
    return record


def stored_config(kind: RunKind, record: RunRecord) -> Any:
    """The configuration ``record``'s run trained with; InputError for one that does not read."""
    try:
        return kind.config_type.from_dict(record.section("training"))
    except (TypeError, ValueError) as err:
        raise InputError(f"{record.source}: bad training configuration: {err}") from None


def plain(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples become lists)."""
    return json.loads(json.dumps(value, sort_keys=True))


def first_difference(given: Any, stored: Any, *, prefix: str = "",
                     skip: tuple[str, ...] = ()) -> str | None:
    """The first field (dotted, in sorted order) where ``given`` and ``stored`` differ, with both
    values, or None; top-level keys in ``skip`` are not compared."""
    if isinstance(given, Mapping) and isinstance(stored, Mapping):
        for key in sorted(set(given) | set(stored)):
            if not prefix and key in skip:
                continue
            found = first_difference(given.get(key), stored.get(key), prefix=f"{prefix}{key}.")
            if found is not None:
                return found
        return None
    return None if given == stored else f"{prefix[:-1]} (stored {stored!r}, given {given!r})"


def check_same_run(kind: RunKind, cfg: Any, record: RunRecord) -> None:
    """InputError naming the first field where ``cfg`` differs from the configuration of
    ``record``'s run (fields that may change on resume are not compared), or when ``record`` is
    not a run of ``kind``."""
    stored = record.section("training")
    if not stored:
        raise InputError(f"{record.source}: holds no training configuration; not a run to resume")
    if record.task != kind.task:
        raise InputError(f"{record.source}: holds a {record.task} run, not a {kind.noun} run; "
                         "give another --out")
    differs = first_difference(plain(cfg.to_dict()), plain(stored), skip=RESUME_FIELDS)
    if differs is not None:
        raise InputError(f"{record.source}: the run there was trained with another configuration: "
                         f"{differs}; give the same flags, or another --out")


def check_same_origin(init_from: Path | str | None, record: RunRecord) -> None:
    """InputError when ``record``'s run started from another model than ``init_from``."""
    stored = record.init_from
    path = stored.get("path") if stored is not None else None
    given = None if init_from is None else str(Path(init_from).resolve())
    if path != given:
        raise InputError(f"{record.source}: the run there started from "
                         f"{path or 'random weights'}, not {given or 'random weights'}; give the "
                         "same --init-from, or another --out")
