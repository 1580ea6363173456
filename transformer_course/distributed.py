"""Appendix B: one training run on several processes, each with its own device, launched by torchrun.

    torchrun --standalone --nproc-per-node 2 -m transformer_course.translate train

torchrun starts the same program N times and tells each copy who it is through environment variables:
RANK (0 .. N-1 over all machines), LOCAL_RANK (its number on this machine, which picks its GPU),
LOCAL_WORLD_SIZE (the number of processes on this machine) and WORLD_SIZE (N), plus MASTER_ADDR and
MASTER_PORT, where the processes meet. `setup()` reads them and joins the process group: NCCL between
GPUs when the machine has a GPU for each of its processes, else gloo on the CPU for every process. From
then on `training.fit` trains one model on all processes: each computes the gradient of its share of every
batch, and DistributedDataParallel averages the gradients, so every process takes the same optimizer step.

Without torchrun, `setup()` returns rank 0 of 1 and starts nothing: the same program runs alone.
`time_steps` times chapter 12's training on every process; its command line is `transformer_course.cli.distributed`.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from . import data, datasets, training, translate
from ._validate import check_positive_int


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
        return int(value)  # type: ignore[arg-type]  # None raises TypeError, handled below
    except (TypeError, ValueError):
        raise RuntimeError(
            f"torchrun sets {name} to an integer, found {value!r}: launch with torchrun, or unset WORLD_SIZE"
        ) from None


def setup(device: torch.device | str | None = None, timeout: datetime.timedelta | None = None) -> Process:
    """Join the process group torchrun started (one process per device), or return rank 0 of 1 without it.

    device defaults to GPU LOCAL_RANK when the machine has a GPU for each of its processes (they share its
    GPUs out by local rank), else the CPU for every process (NCCL expects a GPU per rank: two ranks on one GPU fail,
    by users' reports, with its "Duplicate GPU detected" error);
    "cuda" without an index also means GPU LOCAL_RANK. The backend follows the device: NCCL for GPUs, gloo
    for the CPU. timeout bounds how long a collective waits for the other processes (PyTorch's default:
    10 minutes for NCCL, 30 for gloo), e.g. while rank 0 evaluates.
    """
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"timeout must be a datetime.timedelta or None, got {type(timeout).__name__}")
    world_size = _environment_int("WORLD_SIZE") if "WORLD_SIZE" in os.environ else 1
    if world_size == 1:
        return Process(0, 1, _process_device(device, 0, 1))
    local_rank = _environment_int("LOCAL_RANK")
    local_size = _environment_int("LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in os.environ else world_size
    device = _process_device(device, local_rank, local_size)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # "cuda" now means this process's GPU, for every library
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=timeout)
    return Process(dist.get_rank(), dist.get_world_size(), device)


def _process_device(device: torch.device | str | None, local_rank: int, local_size: int) -> torch.device:
    """The device of the process of local rank `local_rank` among `local_size` on this machine (see `setup`)."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device is None:  # every process decides alike, so that all of them pick one backend
        device = "cuda" if gpus >= local_size else "cpu"
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:  # bare "cuda" is GPU 0: every rank would share it
        device = torch.device("cuda", local_rank)
    if device.type == "cuda" and not gpus:
        raise ValueError(f"device={str(device)!r}, but this machine has no CUDA GPU: run on the CPU")
    if device.type == "cuda" and device.index is not None and device.index >= gpus:
        names = "cuda:0" if gpus == 1 else f"cuda:0 to cuda:{gpus - 1}"
        fix = f"use {names}"
        if local_size > gpus:  # more processes on this machine than GPUs: the index came from LOCAL_RANK
            fix = (
                f"start at most {gpus} process{'es' if gpus > 1 else ''} per machine (torchrun --nproc-per-node {gpus})"
            )
        raise ValueError(
            f"device={str(device)!r}, but this machine has {gpus} GPU{'s' if gpus > 1 else ''} ({names}): {fix}, "
            "or run on the CPU"
        )
    return device


def cleanup() -> None:
    """Leave the process group (at the end of training, also after an error); nothing to do without one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# ----------------------------------------------------------------------------- timing


def time_steps(
    steps: int = 50,
    warmup_steps: int = 5,
    batch_size: int = 64,
    accumulate: int = 1,
    precision: str = "fp32",
    device: torch.device | str | None = None,
) -> tuple[float, float]:
    """(seconds per step, loss of the last step) of training chapter 12's translator on this process's device.

    Run in every process torchrun started (after `setup()`), the processes share every batch. The first
    `warmup_steps` steps are not timed; there is no evaluation. The loss is that of the whole global batch,
    the same (to rounding) however many processes train.
    """
    check_positive_int(steps, "steps")
    check_positive_int(warmup_steps, "warmup_steps")
    config = translate.TranslatorConfig(batch_size=batch_size, accumulate=accumulate, precision=precision)
    device = training.get_device() if device is None else torch.device(device)
    training.set_seed(0)
    corpus = data.ParallelCorpus(datasets.make_dataset(0).train_pairs)
    net = translate.build_model(corpus, config).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = training.noam_scheduler(optimizer, config.d_model, config.warmup)
    loss_fn = training.LabelSmoothingLoss(len(corpus.tgt_vocab), config.smoothing, corpus.tgt_vocab.pad_id)
    batches = corpus.batches(batch_size, seed=0, device=device)
    for n in (warmup_steps, steps):  # warm-up steps first, untimed in what is returned
        history = training.fit(
            net, batches, n, optimizer, loss_fn, scheduler, progress=False, accumulate=accumulate, precision=precision
        )
    return history.seconds / steps, history.losses[-1]


if __name__ == "__main__":  # the command line lives in transformer_course.cli.distributed
    from transformer_course.cli.distributed import main

    raise SystemExit(main())
