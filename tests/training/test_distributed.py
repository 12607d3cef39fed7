"""Two gloo processes on the CPU make the same updates as one process with the same global batch."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from transformer.training import distributed

WORKER = Path(__file__).parent / "ddp_worker.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("task", ["translation", "classification"])
def test_two_processes_equal_one_with_the_same_global_batch(tmp_path, task):
    sys.path.insert(0, str(WORKER.parent))
    try:
        import ddp_worker
    finally:
        sys.path.remove(str(WORKER.parent))
    classify = task == "classification"
    out = tmp_path / "ddp.safetensors"
    procs = launch([str(out), *(["classify"] if classify else [])])
    for p in procs:
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output.decode()[-3000:]
    # one process, the whole global batch of 8 examples per update, no accumulation
    single = ddp_worker.train(0, 1, accumulate=1, classify=classify)
    start = (ddp_worker.tiny_classifier if classify else ddp_worker.tiny_model)(seed=0)
    ddp = load_file(str(out))
    assert ddp.keys() == single.state_dict().keys()
    for name, value in single.state_dict().items():
        torch.testing.assert_close(ddp[name], value, atol=1e-5, rtol=1e-5, msg=name)
    assert any(not torch.equal(v, start.state_dict()[k]) for k, v in single.state_dict().items())


def launch(args: list[str]) -> list[subprocess.Popen]:
    port = free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    return procs


@pytest.mark.parametrize("signalled", [0, 1])
def test_a_signal_to_one_rank_stops_every_rank_after_the_same_update(tmp_path, signalled):
    procs = launch([str(tmp_path), "preempt"])
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready-{rank}").exists() for rank in range(2)):
            assert all(p.poll() is None for p in procs) and time.monotonic() < deadline
            time.sleep(0.01)
        procs[signalled].send_signal(signal.SIGTERM)  # the other rank gets nothing
        (tmp_path / "go").write_text("")  # both ranks were held inside update 4
        for p in procs:
            output, _ = p.communicate(timeout=60)
            assert p.returncode == 143, output.decode()[-3000:]
    finally:
        for p in procs:  # a rank left waiting for the other must not outlive the test
            if p.poll() is None:
                p.kill()
                p.wait()
    stopped = [int((tmp_path / f"stopped-{rank}").read_text()) for rank in range(2)]
    assert stopped[0] == stopped[1] == 4
    state = torch.load(tmp_path / "checkpoint" / "state.pt", weights_only=True)
    assert state["trainer"]["step"] == stopped[0] and len(state["rng"]) == 2


def test_single_process_helpers_are_identities():
    assert distributed.current().world_size == 1
    dev = torch.device("cpu")
    assert distributed.all_reduce_sum([1.0, 2.0], device=dev) == [1.0, 2.0]
    assert distributed.all_reduce_min(3, device=dev) == 3
    assert distributed.all_reduce_max([3, 0], device=dev) == [3, 0]
    assert distributed.broadcast_int(4, device=dev) == 4
    assert distributed.broadcast_object({"a": 1}) == {"a": 1}
    assert distributed.gather_to_main("x") == ["x"]
    distributed.barrier()


def test_end_process_only_returns_the_status_in_a_process_that_joined_no_group():
    assert distributed.end_process(143) == 143


def ended_with(monkeypatch) -> list:
    """Pretend this process joined a group; record what ending it does instead of exiting."""
    ended = []
    monkeypatch.setattr(distributed, "_joined", True)
    monkeypatch.setattr(distributed, "shutdown", lambda: ended.append("left the group"))

    def exit_now(status):
        ended.append(status)
        raise SystemExit(status)

    monkeypatch.setattr(distributed, "_exit", exit_now)
    return ended


def test_a_rank_ends_with_its_status_after_leaving_the_group(monkeypatch):
    ended = ended_with(monkeypatch)
    with pytest.raises(SystemExit):
        distributed.end_process(143)
    assert ended == ["left the group", 143]


def test_the_command_line_of_a_rank_ends_the_process_with_its_status(monkeypatch, tmp_path):
    """train declares how its process ends (the entry's end_process): a rank that joined a group
    ends there, with the status of its error, after leaving the group."""
    from transformer.cli import main

    ended = ended_with(monkeypatch)
    with pytest.raises(SystemExit):
        main(["train", "--data-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "run")])
    assert ended[-2:] == ["left the group", 2]


def test_a_verb_that_joins_no_group_returns_its_status(monkeypatch, tmp_path):
    from transformer.cli import main

    ended = ended_with(monkeypatch)
    assert main(["translate", "--model", str(tmp_path / "missing")]) == 2
    assert ended == []
