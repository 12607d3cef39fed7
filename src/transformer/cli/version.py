"""``transformer version``: the package and PyTorch versions, and what this machine can do (the
CPU's instruction set as PyTorch uses it, native bf16, VNNI, the int8 engine, CUDA devices)."""

from __future__ import annotations

import argparse

from transformer.cli.common import add_json, emit_json


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("version", help="print the package and PyTorch versions and the machine",
                       description="The package and PyTorch versions and what this machine can "
                       "do: the CPU (model, instruction set as PyTorch uses it, native bf16, VNNI, "
                       "int8 engine) and CUDA devices. Every benchmark records the same.")
    add_json(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from transformer import __version__
    from transformer.hardware import detect

    machine = detect()  # without importing PyTorch where no GPU can be and the CPU is known
    info = {"transformer": __version__, "torch": machine.torch, "machine": machine.to_dict()}
    if args.json:
        emit_json(info)
    else:
        print(f"transformer {info['transformer']} (torch {info['torch']})")
        print(f"machine: {machine.summary()}")
    return 0
