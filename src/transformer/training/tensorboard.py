"""``RUN_DIR/tensorboard/``: the figures of ``metrics.jsonl`` as TensorBoard event files, for
``train --tensorboard`` and ``classify train --tensorboard`` (``tensorboard --logdir RUN_DIR``).

Each record of ``metrics.jsonl`` becomes scalars named ``KIND/FIELD`` at its update (its ``step``):

- ``train/loss``, ``train/lr``, ``train/tokens_per_s``: the training figures of a logged update;
- ``valid/FIELD``: every figure of an evaluation (``loss``, ``bleu``, ``chrf``, ``accuracy``,
  ``macro_f1``, ...), whatever the task reports;
- ``average/FIELD``: the evaluation of the average of the last snapshots (``--average-last``).

Scalars are TensorBoard's own (``simple_value``, a 32-bit float): the values read back equal the
JSON file's rounded to float32, which ``metrics.jsonl`` keeps in full (a 64-bit tensor summary
would keep every bit, but TensorBoard's default fast loader shows no such scalar). The precision
the run chose and the machine are text (``run/precision``, ``run/machine``). A resumed run drops the
events written after its checkpoint from the event files (:func:`drop_events_after`), as it drops
those lines of ``metrics.jsonl``, so the curves never hold an update twice whatever reads them
(TensorBoard's ``purge_step`` is honoured by some of its readers only). TensorBoard is an optional
dependency (the ``tensorboard`` extra).
"""

from __future__ import annotations

import io
import logging
import struct
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from transformer.atomic import atomic_write_bytes
from transformer.errors import InputError

log = logging.getLogger(__name__)

TENSORBOARD_DIR = "tensorboard"
TRAIN_SCALARS = ("loss", "lr", "tokens_per_s")
# fields of a record that place it (when, where in the data) rather than measure the model
PLACE = frozenset({"kind", "step", "epoch", "lr", "elapsed_s", "eta_s", "snapshots", "kept"})
# kinds whose every figure is a scalar (``skipped`` records are warnings, not curves)
EVALUATIONS = ("valid", "average")
FLUSH_SECONDS = 10  # how stale a curve may be while the run goes on (TensorBoard's default: 120)


def require_tensorboard() -> None:
    """InputError in one line when the ``tensorboard`` package is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        raise InputError("--tensorboard needs the tensorboard package: pip install "
                         "'transformer[tensorboard]' (or pip install tensorboard)") from None


def scalars_of(record: Mapping[str, Any]) -> dict[str, float]:
    """The scalars of a ``metrics.jsonl`` record, by tag (see the module docstring); none for a
    kind that is not a curve."""
    kind = record.get("kind")
    if kind == "train":
        names = [name for name in TRAIN_SCALARS if name in record]
    elif kind in EVALUATIONS:
        names = [name for name in record if name not in PLACE]
    else:
        return {}
    return {f"{kind}/{name}": float(record[name]) for name in names
            if isinstance(record[name], int | float) and not isinstance(record[name], bool)}


def _after_existing(folder: Path) -> None:
    """Wait, if need be, until the clock's second is past the newest event file's in ``folder``.
    Readers take a run's files in name order, and a name starts with the second it was made,
    then the host and the process id: a resume within the same second of a stop, in a process of
    lower id, would otherwise be read before the updates it continues."""
    seconds = [int(p.name.split(".")[3]) for p in folder.glob("events.out.tfevents.*")
               if len(p.name.split(".")) > 3 and p.name.split(".")[3].isdigit()]
    while seconds and time.time() < max(seconds) + 1:
        time.sleep(0.02)


class TensorBoardWriter:
    """A new event file in ``folder``: :meth:`write` a record's scalars, :meth:`close` at the end;
    ``notes``: text by name, written first, at update ``step`` (where the run starts)."""

    def __init__(self, folder: Path, *, notes: Mapping[str, str] | None = None,
                 step: int = 0) -> None:
        require_tensorboard()
        from torch.utils.tensorboard import SummaryWriter

        _after_existing(folder)
        self.writer = SummaryWriter(log_dir=str(folder), flush_secs=FLUSH_SECONDS)
        for name, text in (notes or {}).items():
            self.writer.add_text(f"run/{name}", text, global_step=step)

    def write(self, record: Mapping[str, Any]) -> None:
        step = int(record.get("step", 0))
        for tag, value in scalars_of(record).items():
            self.writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        self.writer.close()


# an event file is a TFRecord file: per record a little-endian uint64 length, its masked CRC-32C
# (uint32), the bytes (a serialized Event) and their masked CRC-32C (uint32)
_HEADER = struct.Struct("<QI")
_FOOTER = 4


def _records(data: bytes) -> Iterator[bytes]:
    """The serialized events of an event file's bytes; a record cut short (a kill during a
    write) ends them."""
    at = 0
    while at + _HEADER.size <= len(data):
        length, _ = _HEADER.unpack_from(data, at)
        end = at + _HEADER.size + length + _FOOTER
        if end > len(data):
            return
        yield data[at + _HEADER.size:end - _FOOTER]
        at = end


def drop_events_after(folder: Path, step: int) -> None:
    """Rewrite every event file in ``folder`` without the summaries of updates after ``step``
    (and without a record a kill cut short), each file replaced atomically; nothing when the
    folder is missing. Without the tensorboard package the files are left as they are (a warning
    says so)."""
    files = sorted(folder.glob("events.out.tfevents.*")) if folder.is_dir() else []
    if not files:
        return
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.summary.writer.record_writer import RecordWriter
    except ImportError:
        log.warning("%s: the events after update %d stay (the tensorboard package is not "
                    "installed to rewrite them)", folder, step)
        return
    for path in files:
        kept = io.BytesIO()
        writer = RecordWriter(kept)
        for raw in _records(path.read_bytes()):
            event = Event.FromString(raw)
            if not event.HasField("summary") or event.step <= step:
                writer.write(raw)
        atomic_write_bytes(path, kept.getvalue())
