"""Two gloo processes on the CPU make the same updates as one process with the same global batch."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from transformer.training import distributed

WORKER = Path(__file__).parent / "ddp_worker.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_equal_one_with_the_same_global_batch(tmp_path):
    sys.path.insert(0, str(WORKER.parent))
    try:
        import ddp_worker
    finally:
        sys.path.remove(str(WORKER.parent))
    out = tmp_path / "ddp.safetensors"
    port = free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(out)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for p in procs:
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output.decode()[-3000:]
    # one process, the whole global batch of 8 pairs per update, no accumulation
    single = ddp_worker.train(0, 1, accumulate=1)
    ddp = load_file(str(out))
    for name, value in single.state_dict().items():
        torch.testing.assert_close(ddp[name], value, atol=1e-5, rtol=1e-5, msg=name)
    assert any(not torch.equal(v, ddp_worker.tiny_model(seed=0).state_dict()[k])
               for k, v in single.state_dict().items())


def test_single_process_helpers_are_identities():
    assert distributed.current().world_size == 1
    dev = torch.device("cpu")
    assert distributed.all_reduce_sum([1.0, 2.0], device=dev) == [1.0, 2.0]
    assert distributed.all_reduce_min(3, device=dev) == 3
    assert distributed.broadcast_int(4, device=dev) == 4
    assert distributed.broadcast_object({"a": 1}) == {"a": 1}
    assert distributed.gather_to_main("x") == ["x"]
    distributed.barrier()
