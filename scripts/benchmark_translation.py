"""Two figures for chapter 12, measured on this machine (timings live here, never in the tests).

1. Seed 001's five sentence pairs: training steps and seconds until greedy decoding translates all five
   exactly (median over seeds; every seed must succeed). The model is `demo.train_seed_pairs`'s:
   d_model 64, 2 layers, Adam 1e-3, the full batch, checked after every step.
2. The generated zh→en corpus: seconds until the held-out test set (triples never seen in training)
   reaches 95 % exact match, with `translate.train_translator`'s default model and schedule; then the
   default run that the CLI does (stop at 100 % on the validation set) and its test score.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/benchmark_translation.py [--seeds 5]

Seconds are wall time of the training loop including its periodic evaluations, on one thread.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys

import torch

import transformer_course as tc
from transformer_course import translate
from transformer_course.demo import train_seed_pairs


def seed_pairs_figure(seeds: range) -> bool:
    print(f"1. seed 001's five pairs, until all five decode exactly (seeds {seeds.start}..{seeds.stop - 1})")
    train_seed_pairs(seed=0, progress=False)  # warm-up run: first calls pay for lazy initialisation
    steps, seconds, ok = [], [], True
    for seed in seeds:
        _, _, history = train_seed_pairs(seed=seed, progress=False, eval_every=1)
        solved = history.evals[-1][1] == 1.0
        ok &= solved
        steps.append(history.steps)
        seconds.append(history.seconds)
        print(f"   seed {seed}: {history.steps:3d} steps, {history.seconds:.3f} s{'' if solved else '  NOT SOLVED'}")
    print(f"   median: {statistics.median(steps):g} steps, {statistics.median(seconds):.3f} s; all solved: {ok}")
    return ok


def corpus_figure(seeds: range) -> bool:
    print(f"2. generated corpus, until the held-out test set reaches 95 % exact match (seeds {seeds.start}..)")
    seconds, ok = [], True
    for seed in seeds:
        result = translate.train_translator(seed=seed, eval_split="test", target=0.95, progress=False)
        step, score = result.history.evals[-1]
        ok &= score >= 0.95
        seconds.append(result.history.seconds)
        print(
            f"   seed {seed}: {score:.1%} of {len(result.dataset.test)} test sentences after {step} steps, "
            f"{result.history.seconds:.1f} s"
        )
    print(f"   median: {statistics.median(seconds):.1f} s; all reached 95 %: {ok}")

    result = translate.train_translator(seed=0, progress=False)
    test = translate.evaluate(result.model, result.corpus, result.dataset.test_pairs)
    print(
        f"   default run (stop at 100 % validation, seed 0): {result.history.steps} steps, "
        f"{result.history.seconds:.1f} s, {tc.count_parameters(result.model):,} parameters; "
        f"test exact match {test.exact_match:.1%}, BLEU {test.bleu:.1f}"
    )
    return ok and test.exact_match >= 0.95


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds per figure (default 5)")
    args = parser.parse_args(argv)
    threads = tc.set_threads(1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} cores, {threads} thread, "
        f"device {tc.get_device()}, load average {load:.2f}"
    )
    ok = seed_pairs_figure(range(args.seeds))
    ok &= corpus_figure(range(args.seeds))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
