"""What every command-line program shares: one-line errors, the --seed type, a top-level error handler."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from .. import distributed


class CLIError(Exception):
    """A problem to report to the user in one line, with an exit code (2: the command line itself is wrong)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (argparse's own prints the usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def seed_argument(text: str) -> int:
    """argparse's `type=` for --seed: an int in [0, 2**64 - 1], the range of PyTorch's generators."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= seed < 2**64:
        raise argparse.ArgumentTypeError(f"{seed} is outside [0, 2**64 - 1], the range of PyTorch's generators")
    return seed


def report_errors(command: Callable[[], int]) -> int:
    """Run `command`; a CLIError becomes `error: ...` on stderr and its exit code, Ctrl-C exit code 130."""
    try:
        return command()
    except CLIError as e:
        # One write per line: under torchrun every process reports the error to the same stream, and
        # print's two writes (text, then newline) from two processes can interleave.
        sys.stderr.write(f"error: {e}\n")
        sys.stderr.flush()
        return e.code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """--device: what `join_processes` passes to `distributed.setup`."""
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default=None,
        help="cpu, or cuda: GPU LOCAL_RANK under torchrun (default: cuda when the machine has a GPU for each "
        "process, else cpu)",
    )  # fmt: skip


def join_processes(device: str | None = None) -> distributed.Process:
    """`distributed.setup(device)` (rank 0 of 1 without torchrun), its refusals turned into one-line errors."""
    try:
        return distributed.setup(device)
    except (RuntimeError, ValueError) as e:  # a stale WORLD_SIZE, a rendezvous that cannot be reached, no GPU
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        joining = "cannot join the other processes: " if "WORLD_SIZE" in os.environ else ""
        raise CLIError(f"{joining}{first}") from None
