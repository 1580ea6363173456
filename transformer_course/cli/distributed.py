"""`python -m transformer_course.distributed`: time training steps of chapter 12's translator, on 1 or N processes.

  python -m transformer_course.distributed                                         # one process
  torchrun --standalone --nproc-per-node 2 -m transformer_course.distributed       # two processes

Every process builds the same model and draws the same global batches; under torchrun each computes
its share. Rank 0 prints the time per step (after untimed warm-up steps) and the loss of the last step,
which is the same, to rounding, however many processes trained.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .. import distributed, training
from ._common import CLIError, Parser, add_device_option, join_processes, report_errors

CLI = "python -m transformer_course.distributed"


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog=CLI, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
    parser.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first (default 5)")
    parser.add_argument("--batch-size", type=int, default=64, help="global batch (default 64)")
    parser.add_argument("--accumulate", type=int, default=1, help="micro-batches per step (default 1)")
    parser.add_argument("--precision", choices=tuple(training.PRECISIONS), default="fp32", help="(default fp32)")
    add_device_option(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    for name in ("steps", "warmup_steps", "batch_size", "accumulate"):
        if getattr(args, name) <= 0:
            raise CLIError(f"--{name.replace('_', '-')}={getattr(args, name)} must be a positive integer", code=2)
    training.set_threads(1)
    process = join_processes(args.device)  # rank 0 of 1 without torchrun
    try:
        seconds, loss = distributed.time_steps(
            args.steps, args.warmup_steps, args.batch_size, args.accumulate, args.precision, process.device
        )
    except (TypeError, ValueError) as e:  # e.g. a batch that 2 processes cannot share
        raise CLIError(str(e), code=2) from None
    finally:
        distributed.cleanup()
    if process.is_main:
        who = f"{process.world_size} process{'es' if process.world_size > 1 else ''} on {process.device.type}"
        print(
            f"{who}, {args.precision}: {1000 * seconds:.1f} ms per step of {args.batch_size} sentence pairs "
            f"({args.steps} steps); loss after {args.warmup_steps + args.steps} steps {loss:.4f}"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit code."""
    return report_errors(lambda: _run(_parser().parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
