"""`python -m transformer_course.demo`: train a small Transformer on post 1's five sentence pairs, translate them.

It prints the model's size, the steps it took, and each pair's translation beside the expected one.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .. import decoding, demo, model, training
from ._common import Parser, report_errors, seed_argument

CLI = "python -m transformer_course.demo"


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog=CLI, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=seed_argument, default=0, help="random seed (default 0)")
    return parser


def _run(args: argparse.Namespace) -> int:
    training.set_threads()
    net, corpus, history = demo.train_post1_pairs(args.seed)
    print(f"trained {model.count_parameters(net):,} parameters for {history.steps} steps in {history.seconds:.1f} s")
    batch = corpus.batch()
    out = decoding.greedy_decode(net, batch.src, 10, corpus.tgt_vocab.sos_id, corpus.tgt_vocab.eos_id)
    for (src, ref), row in zip(corpus.pairs, out):
        hyp = " ".join(corpus.tgt_vocab.decode(row))
        print(f"{src:<14} -> {hyp:<28} {'ok' if hyp == ref else 'expected: ' + ref}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit code."""
    return report_errors(lambda: _run(_parser().parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
