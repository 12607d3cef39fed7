"""``RUN_DIR/metrics.jsonl``: one JSON object per logged step and per evaluation; and
:class:`MetricsLog`, where a run sends its records: that file and, with ``--tensorboard``, the
same figures as TensorBoard events (:mod:`~transformer.training.tensorboard`).

Lines are appended as training goes; a resumed run first drops the lines written after its
checkpoint (it will write them again), so the file never holds a step twice.

    with MetricsLog(run_dir, tensorboard=True, notes={"precision": "fp32 ..."}) as metrics:
        trainer = Trainer(..., run_dir=run_dir, metrics=metrics)   # the Trainer writes
        trainer.fit()                                              # a signal or a NaN raises: closed
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from transformer.atomic import atomic_write_text
from transformer.errors import WriteError

METRICS_FILE = "metrics.jsonl"


def append_metrics(run_dir: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line of ``run_dir/metrics.jsonl`` (the folder is made if missing)."""
    path = run_dir / METRICS_FILE
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
    except OSError as err:
        raise WriteError(f"{path}: could not append ({err.strerror or err})") from err


def truncate_metrics(run_dir: Path, step: int) -> None:
    """Drop the lines of ``run_dir/metrics.jsonl`` written after update ``step``, and any line a
    kill cut short."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill
    atomic_write_text(path, "".join(k + "\n" for k in kept))


class MetricsLog:
    """Where a run's records go: ``run_dir/metrics.jsonl`` (nowhere without a ``run_dir``) and,
    with ``tensorboard``, event files in ``run_dir/tensorboard/`` holding their figures and the
    ``notes`` (text by name: the precision, the machine).

    A resumed run's :meth:`truncate` drops what was written after its checkpoint, lines and
    events; the event files are opened at the first record after it. Close the log (or use it as
    a context manager) on every way out of a run, so the last events reach the disk.
    """

    def __init__(self, run_dir: Path | str | None, *, tensorboard: bool = False,
                 notes: Mapping[str, str] | None = None) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.tensorboard = tensorboard and self.run_dir is not None
        self.notes = dict(notes or {})
        self._events: Any = None  # the TensorBoardWriter, once opened
        self._resumed_at: int | None = None
        self.closed = False
        if self.tensorboard:
            from transformer.training.tensorboard import require_tensorboard

            require_tensorboard()

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` to ``metrics.jsonl`` and, with tensorboard, write its figures."""
        if self.run_dir is None:
            return
        append_metrics(self.run_dir, record)
        if self.tensorboard:
            self._open().write(record)

    def truncate(self, step: int) -> None:
        """A run resumed at update ``step``: drop what was written after it."""
        if self.run_dir is None:
            return
        from transformer.training.tensorboard import TENSORBOARD_DIR, drop_events_after

        truncate_metrics(self.run_dir, step)
        drop_events_after(self.run_dir / TENSORBOARD_DIR, step)
        self._resumed_at = step

    def _open(self) -> Any:
        if self._events is None:
            from transformer.training.tensorboard import TENSORBOARD_DIR, TensorBoardWriter

            assert self.run_dir is not None
            self._events = TensorBoardWriter(self.run_dir / TENSORBOARD_DIR, notes=self.notes,
                                             step=self._resumed_at or 0)
            self.closed = False
        return self._events

    def close(self) -> None:
        """Flush and close the event files (a later record opens new ones)."""
        if self._events is not None:
            self._events.close()
            self._events = None
        self.closed = True

    def __enter__(self) -> MetricsLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
