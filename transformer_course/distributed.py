"""Appendix B: one training run on several processes, each with its own device, launched by torchrun.

    torchrun --standalone --nproc-per-node 2 -m transformer_course.translate train

torchrun starts the same program N times and tells each copy who it is through environment variables:
RANK (0 .. N-1 over all machines), LOCAL_RANK (its number on this machine, which picks its GPU) and
WORLD_SIZE (N), plus MASTER_ADDR and MASTER_PORT, where the processes meet. `setup()` reads them and
joins the process group: gloo on the CPU, NCCL between GPUs. From then on `training.fit` trains one
model on all processes: each computes the gradient of its share of every batch, and
DistributedDataParallel averages the gradients, so every process takes the same optimizer step.

Without torchrun, `setup()` returns rank 0 of 1 and starts nothing: the same program runs alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .training import get_device


@dataclass(frozen=True)
class Process:
    """Who this process is: its rank among world_size processes, and the device it trains on."""

    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        """Rank 0, the one process that prints, shows progress and writes files."""
        return self.rank == 0


def _environment_int(name: str) -> int:
    value = os.environ.get(name)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RuntimeError(
            f"torchrun sets {name} to an integer, found {value!r}: launch with torchrun, or unset WORLD_SIZE"
        ) from None


def setup(device: torch.device | str | None = None) -> Process:
    """Join the process group torchrun started (one process per device), or return rank 0 of 1 without it.

    device defaults to GPU LOCAL_RANK when GPUs are present (processes on one machine share its GPUs
    out by local rank), else the CPU. The backend follows the device: NCCL for GPUs, gloo for the CPU.
    """
    world_size = _environment_int("WORLD_SIZE") if "WORLD_SIZE" in os.environ else 1
    if world_size == 1:
        return Process(0, 1, get_device() if device is None else torch.device(device))
    local_rank = _environment_int("LOCAL_RANK")
    if device is None:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # "cuda" now means this process's GPU, for every library
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Process(dist.get_rank(), dist.get_world_size(), device)


def cleanup() -> None:
    """Leave the process group (at the end of training, also after an error); nothing to do without one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
