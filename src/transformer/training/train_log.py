"""What the training loop shows while it runs: a log line per logged update, or a progress bar
(tqdm, command-line runs only) with the same figures; ``metrics.jsonl`` holds them in full.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from transformer.training.loop_state import LoopConfig, TrainState


def clock(seconds: float) -> str:
    """``83.2`` -> ``"1m23s"``."""
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def train_record(state: TrainState, *, epoch: float, loss: float, lr: float, tokens_per_s: float,
                 eta: float | None) -> dict[str, Any]:
    """The ``train`` record of ``metrics.jsonl`` after update ``state.step``: the mean ``loss``
    of the updates since the last record, the ``lr`` of the next update, the pace, the time."""
    return {
        "kind": "train",
        "step": state.step,
        "epoch": epoch,
        "loss": loss,
        "lr": lr,
        "tokens_per_s": tokens_per_s,
        "elapsed_s": round(state.elapsed_s, 3),
        "eta_s": None if eta is None else round(eta, 1),
        "skipped_updates": state.skipped_updates,
    }


def valid_record(state: TrainState, *, epoch: float, lr: float) -> dict[str, Any]:
    """The ``valid`` record of ``metrics.jsonl``: the figures of the evaluation at update
    ``state.step`` (``state.last_eval``)."""
    return {"kind": "valid", "step": state.step, "epoch": epoch, "lr": lr,
            "elapsed_s": round(state.elapsed_s, 3), **state.last_eval}


def valid_line(state: TrainState, *, better: bool) -> str:
    """The log line of an evaluation: its figures, and ``best`` when its model is kept."""
    figures = " | ".join(f"{k} {v:.4g}" for k, v in state.last_eval.items())
    return f"valid step {state.step} | {figures}" + (" | best" if better else "")


def train_line(record: dict[str, Any], *, config: LoopConfig, eta: float | None) -> str:
    """The log line of a ``train`` record of ``metrics.jsonl``, with the budget beside each
    figure it bounds: ``step 50/1000 | epoch 0.21/10 | loss 5.1234 | lr ... | 1m40s/30m00s``."""
    steps = f"/{config.max_steps}" if config.max_steps is not None else ""
    epochs = f"/{config.epochs}" if config.epochs is not None else ""
    time = clock(record["elapsed_s"])
    if config.minutes is not None:
        time += f"/{clock(config.minutes * 60)}"
    return (f"step {record['step']}{steps} | epoch {record['epoch']:.2f}{epochs} | "
            f"loss {record['loss']:.4f} | lr {record['lr']:.3e} | "
            f"{record['tokens_per_s']:,.0f} tok/s | {time}"
            + (f" | eta {clock(round(eta))}" if eta is not None else ""))


def show_on_bar(bar: Any, record: dict[str, Any], *, planned: int | None) -> None:
    """Put a ``train`` record's figures on the progress bar; ``planned`` (the updates the budget
    allows at the pace so far) becomes its total."""
    bar.total = planned or bar.total
    bar.set_postfix(loss=f"{record['loss']:.3f}", lr=f"{record['lr']:.2e}",
                    tok_s=f"{record['tokens_per_s']:,.0f}", epoch=f"{record['epoch']:.2f}",
                    refresh=False)


@contextlib.contextmanager
def progress_bar(*, enabled: bool, total: int | None, initial: int) -> Iterator[Any]:
    """A tqdm bar counting updates from ``initial`` towards ``total``, or None when not
    ``enabled`` (no bar: log lines instead)."""
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, leave=True) as bar:
        yield bar
