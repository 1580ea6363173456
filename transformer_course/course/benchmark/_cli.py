"""`python -m transformer_course.course.benchmark`: run sections, print their tables, save their figures."""

from __future__ import annotations

import argparse
import inspect
import os
import time
from collections.abc import Callable, Iterator, Sequence

from ...training import set_threads
from ._attention import attention, memory, multihead
from ._bpe import bpe
from ._compiling import compiled
from ._copy_task import copy_task
from ._core import Table, environment, resolve_device
from ._decoding import decoding
from ._figures import figure
from ._language_models import gpt_sampling, gpt_training
from ._modern import modern
from ._references import gpt_vs_nanogpt, transformer_vs_torch
from ._text import text_lm
from ._translation import post1_pairs, translation

SECTIONS = ("attention", "multihead", "decoding", "memory", "copy", "post1", "translation", "gpt_training",
            "gpt_sampling", "gpt_vs_nanogpt", "transformer_vs_torch", "bpe")  # fmt: skip
# Run only when named with --only: compiling takes minutes; modern needs transformers, not a package dependency;
# text_lm trains for 8 minutes of CPU.
OPTIONAL_SECTIONS = ("compile", "modern", "text_lm")
FUNCTIONS: dict[str, Callable[..., Table]] = {
    "attention": attention,
    "multihead": multihead,
    "decoding": decoding,
    "memory": memory,
    "copy": copy_task,
    "post1": post1_pairs,
    "translation": translation,
    "gpt_training": gpt_training,
    "gpt_sampling": gpt_sampling,
    "gpt_vs_nanogpt": gpt_vs_nanogpt,
    "transformer_vs_torch": transformer_vs_torch,
    "bpe": bpe,
    "compile": compiled,
    "modern": modern,
    "text_lm": text_lm,
}
QUICK: dict[str, dict[str, object]] = {
    "attention": dict(lengths=(64, 256), batch=2, repeats=3, warmup=1),
    "multihead": dict(batch=4, length=64, repeats=3, warmup=1),
    "decoding": dict(batch_sizes=(1, 4), new_tokens=(16, 32), d_model=64, n_heads=4, d_ff=256, repeats=1),
    "memory": dict(lengths=(256, 512), repeats=1),
    "copy": dict(),
    "post1": dict(seeds=1),
    "translation": dict(seeds=1),
    "gpt_training": dict(steps=200, eval_every=50, seeds=1),
    "gpt_sampling": dict(batch_sizes=(1, 4), new_tokens=(16, 32), d_model=64, d_ff=256, n_layers=2, repeats=1),
    "gpt_vs_nanogpt": dict(steps=2, repeats=3),
    "transformer_vs_torch": dict(batch=4, src_len=16, tgt_len=12, n_layers=2, repeats=3),
    "bpe": dict(vocab_sizes=(300,), max_chars=5_000),
    "compile": dict(length=64, repeats=3, warmup=1),
    "modern": dict(d_model=64, n_layers=2, n_heads=4, batch=2, length=32, new_tokens=16, repeats=1),
    "text_lm": dict(minutes=(0.02,), vocab_size=300, train_chars=40_000),
}


def run(sections: Sequence[str] = SECTIONS, quick: bool = False, device=None, **overrides) -> Iterator[Table]:
    """Run `sections` in order, yielding each Table as it is done; `overrides` go to every section that takes them."""
    for name in sections:
        if name not in FUNCTIONS:
            raise ValueError(f"section {name!r} is not one of {list(SECTIONS + OPTIONAL_SECTIONS)}")
    for name in sections:
        kwargs = dict(QUICK[name]) if quick else {}
        fn = FUNCTIONS[name]
        kwargs.update({k: v for k, v in overrides.items() if k in inspect.signature(fn).parameters})
        yield fn(device=device, **kwargs)


def choose_threads(requested: int | None) -> tuple[int, str]:
    """The CPU threads to use and where that number came from: --threads, else OMP_NUM_THREADS, else one per core.

    Never more threads than cores (`set_threads` caps it): on a loaded machine the reader's own limit
    matters, since oversubscribed threads make small operations many times slower.
    """
    if requested is not None:
        return set_threads(requested), "--threads"
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"OMP_NUM_THREADS={env!r} must be a positive integer")
        return set_threads(int(env)), "OMP_NUM_THREADS"
    return set_threads(), "one per core"


def main(argv: Sequence[str] | None = None) -> int:
    from . import __doc__ as doc

    parser = argparse.ArgumentParser(
        prog="python -m transformer_course.course.benchmark",
        description=(doc or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats: a smoke test")
    parser.add_argument("--only", nargs="+", choices=SECTIONS + OPTIONAL_SECTIONS, default=list(SECTIONS),
                        metavar="SECTION", help=f"sections to run, among {', '.join(SECTIONS + OPTIONAL_SECTIONS)} "
                        f"(default: all but {', '.join(OPTIONAL_SECTIONS)})")  # fmt: skip
    parser.add_argument("--repeats", type=int, help="timed runs per variant (default: per section)")
    parser.add_argument(
        "--threads", type=int, help="CPU threads (default: OMP_NUM_THREADS if set, else one per core; never more)"
    )
    parser.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    parser.add_argument(
        "--copy-annotated", action="store_true", help="also train the copy task at The Annotated Transformer's size"
    )
    parser.add_argument("--figures", metavar="DIR", help="also save each section's figure as DIR/SECTION.png")
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    try:
        threads, source = choose_threads(args.threads)
    except ValueError as error:
        parser.error(str(error))
    try:
        device = resolve_device(args.device)
    except ValueError as error:
        parser.error(str(error))
    lines = environment(device)
    lines = [f"{line} (from {source})" if line.startswith("torch threads:") else line for line in lines]
    print("\n".join(lines), flush=True)
    overrides: dict[str, object] = {} if args.repeats is None else {"repeats": args.repeats}
    if args.threads is not None:
        overrides["threads"] = threads  # gpt_vs_nanogpt trains on 1 thread, as nanoGPT's CPU example, unless told
    if args.copy_annotated:
        overrides["configs"] = ("small", "annotated")
    start = time.perf_counter()
    if args.figures:
        os.makedirs(args.figures, exist_ok=True)
    for table in run(args.only, args.quick, device, **overrides):
        print("\n" + table.format(), flush=True)
        if args.figures and table.section in _with_figure():
            path = os.path.join(args.figures, f"{table.section}.png")
            figure(table).savefig(path, dpi=120)
            print(f"figure: {path}")
    print(f"\ntotal: {time.perf_counter() - start:.0f} s (threads: {threads})")
    return 0


def _with_figure() -> set[str]:
    from ._figures import PLOTS

    return set(PLOTS)
