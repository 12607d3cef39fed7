"""Data-parallel training with PyTorch's own DDP, launched by ``torchrun``.

Every rank trains on its own shard of the batches; gradients are averaged by DDP. The loss of a
step is divided by the token count of the *global* batch (all ranks, all accumulated micro-batches)
so that N processes make exactly the update that one process makes on the same global batch.
Rank 0 alone writes files. gloo is used on CPU, nccl on GPU.

    torchrun --nproc-per-node 2 -m transformer train ...
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any, NoReturn

import torch
import torch.distributed as dist

# where a device name is resolved is the machine's business; kept importable here
from transformer.hardware import resolve_device as resolve_device

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job: ``rank`` of ``world_size``, GPU ``local_rank``."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def init_distributed(*, device: str = "auto") -> tuple[DistInfo, torch.device]:
    """Join the process group that ``torchrun`` describes in the environment, if any.

    Returns this process's :class:`DistInfo` and its device. Without ``WORLD_SIZE`` > 1 in the
    environment nothing is initialised and the info is a single process's.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device, local_rank=local_rank)
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, rank=rank, world_size=world_size)
        global _joined
        _joined = True
        log.info("rank %d of %d joined (%s, %s)", rank, world_size, backend, dev)
    return current(), dev


def current() -> DistInfo:
    """The info of an initialised process group, or a single process's."""
    if dist.is_available() and dist.is_initialized():
        return DistInfo(
            rank=dist.get_rank(),
            world_size=dist.get_world_size(),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        )
    return DistInfo()


_joined = False  # whether this process ever joined a group (end_process then skips teardown)


def shutdown() -> None:
    """Leave the process group, if one was joined."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def end_process(status: int) -> int:
    """Return ``status``; a process that joined a group instead ends here with it.

    Such a process leaves the group, flushes its streams and logs and exits without the
    interpreter's teardown: threads that gloo and the rendezvous store leave behind can abort a
    process torn down around them (``terminate called without an active exception``, status -6
    where a stopped rank should report 143 to its scheduler).
    """
    if not _joined:
        return status
    shutdown()
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream
            stream.flush()
    _exit(status)


def _exit(status: int) -> NoReturn:
    os._exit(status)


def _comm_device(device: torch.device) -> torch.device:
    # nccl only moves CUDA tensors; gloo is happiest with CPU ones.
    return device if dist.get_backend() == "nccl" else torch.device("cpu")


def all_reduce_sum(values: list[float], *, device: torch.device) -> list[float]:
    """Element-wise sum of ``values`` over ranks (the values themselves in a single process)."""
    if not current().is_distributed:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=_comm_device(device))
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def all_reduce_min(value: int, *, device: torch.device) -> int:
    """The smallest ``value`` over ranks."""
    if not current().is_distributed:
        return value
    t = torch.tensor([value], dtype=torch.int64, device=_comm_device(device))
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item())


def all_reduce_max(values: list[int], *, device: torch.device) -> list[int]:
    """Element-wise maximum of ``values`` over ranks (any rank's flag reaches every rank)."""
    if not current().is_distributed:
        return list(values)
    t = torch.tensor(values, dtype=torch.int64, device=_comm_device(device))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [int(v) for v in t.tolist()]


def broadcast_int(value: int, *, device: torch.device) -> int:
    """Rank 0's ``value`` on every rank (so that every rank stops at the same step)."""
    return int(_broadcast(value, torch.int64, device))


def broadcast_float(value: float, *, device: torch.device) -> float:
    """Rank 0's ``value`` on every rank (rank 0's clock decides for everyone)."""
    return float(_broadcast(value, torch.float64, device))


def _broadcast(value: float, dtype: torch.dtype, device: torch.device) -> float:
    if not current().is_distributed:
        return value
    t = torch.tensor([value], dtype=dtype, device=_comm_device(device))
    dist.broadcast(t, src=0)
    return t.item()


def gather_to_main(obj: Any) -> list[Any] | None:
    """Every rank's ``obj`` as a list on rank 0 (None elsewhere); ``[obj]`` in a single process."""
    info = current()
    if not info.is_distributed:
        return [obj]
    out: list[Any] | None = [None] * info.world_size if info.is_main else None
    dist.gather_object(obj, out, dst=0)
    return out


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` (picklable, from our own code only) on every rank."""
    if not current().is_distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    """Wait for every rank (a no-op in a single process)."""
    if current().is_distributed:
        dist.barrier()
