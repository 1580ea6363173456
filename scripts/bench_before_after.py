"""The benchmark's decoding, gpt_vs_nanogpt and transformer_vs_torch sections on a git revision ("before") and on
the working tree ("after"): the forward, training and greedy-decoding times of the package before and after a change.

    .venv/bin/python scripts/bench_before_after.py HEAD                   # the working tree against the last commit
    .venv/bin/python scripts/bench_before_after.py e5e4999 --threads 2    # against any revision
    .venv/bin/python scripts/bench_before_after.py HEAD --quick           # small sizes: a smoke test (about 20 s)

The revision's `transformer_course/` is extracted with `git archive` into a temporary folder (git's index and
worktrees are left alone), and so is a copy of the working tree's; the working tree's benchmark code
(`_core.py`, `_decoding.py`, `_references.py`) is copied into both as a package of its own, so the two sides take
the same measurements of their own model code, each in a fresh Python process. The folder is removed at the end.
Each side's tables are printed, then one table of the figures before and after. The two sides run one after the
other, not interleaved: the rows of the references (nanogpt_style, nn.Transformer), whose code is the same on both
sides, show how much the machine's load moved in between.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "transformer_course"
BENCH_FILES = ("_core.py", "_decoding.py", "_references.py")
COPY_AS = "_bench_before_after"  # the benchmark files' package inside each side's transformer_course
SECTIONS = {"decoding": "_decoding", "gpt_vs_nanogpt": "_references", "transformer_vs_torch": "_references"}
QUICK = {
    "decoding": dict(new_tokens=(16, 32), d_model=64, n_heads=4, d_ff=256, repeats=1),
    "gpt_vs_nanogpt": dict(steps=2, repeats=3),
    "transformer_vs_torch": dict(batch=4, src_len=16, tgt_len=12, n_layers=2, repeats=3),
}
# What the summary compares, per section: the columns naming a row, then the figures.
SUMMARY = {
    "decoding": (("kernel", "batch", "new_tokens"), ("cached_s", "uncached_s", "speedup")),
    "gpt_vs_nanogpt": (("model",), ("step_ms", "ratio")),
    "transformer_vs_torch": (("source", "model"), ("forward_ms", "ratio")),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revision", nargs="?", help="the git revision measured as 'before' (a commit, HEAD~3, ...)")
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats: a smoke test")
    parser.add_argument("--threads", type=int, default=2, help="torch threads on both sides (default: 2)")
    parser.add_argument("--only", nargs="+", choices=list(SECTIONS), default=list(SECTIONS), metavar="SECTION",
                        help=f"sections to run, among {', '.join(SECTIONS)} (default: all three)")  # fmt: skip
    parser.add_argument(
        "--batches",
        nargs="+",
        type=int,
        default=[1],
        metavar="B",
        help="batch sizes of the decoding section (default: 1, where the KV cache's targets are set)",
    )
    parser.add_argument("--side", help=argparse.SUPPRESS)  # internal: run the sections in this folder's package
    parser.add_argument("--json", help=argparse.SUPPRESS)  # internal: where --side writes its tables' rows
    args = parser.parse_args(argv)
    if args.threads < 1 or min(args.batches) < 1:
        parser.error("--threads and --batches must be at least 1")
    if args.side:
        return run_side(Path(args.side), args, Path(args.json))
    if args.revision is None:
        parser.error("give the git revision to measure as 'before', e.g. HEAD")
    commit = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.revision}^{{commit}}"], cwd=ROOT,
                            capture_output=True, text=True)  # fmt: skip
    if commit.returncode:
        parser.error(f"revision {args.revision!r} is not a commit of this repository")
    with tempfile.TemporaryDirectory(prefix="bench-before-after-") as tmp:
        sides = {f"before: {args.revision} ({commit.stdout.strip()[:10]})": Path(tmp, "before"),
                 "after: the working tree": Path(tmp, "after")}  # fmt: skip
        extract_revision(commit.stdout.strip(), next(iter(sides.values())))
        shutil.copytree(ROOT / PACKAGE, Path(tmp, "after", PACKAGE), ignore=shutil.ignore_patterns("__pycache__"))
        results = {}
        for label, folder in sides.items():
            print(f"\n===== {label}", flush=True)
            results[label] = measure(folder, args)
    print("\n" + summary(results))
    return 0


def extract_revision(commit: str, folder: Path) -> None:
    """The revision's package, written into `folder` without touching git's index or worktrees."""
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, PACKAGE], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)


def measure(folder: Path, args) -> dict:
    """Copy the working tree's benchmark files into `folder`'s package and run the sections there, in a new process."""
    # Two levels below the package, as in the working tree (transformer_course/course/benchmark), so that the
    # copied files' relative imports (`from ...model import`) reach the package.
    target = folder / PACKAGE / "_copied" / COPY_AS
    target.mkdir(parents=True)
    (target.parent / "__init__.py").write_text("")
    (target / "__init__.py").write_text('"""The working tree\'s benchmark sections, copied by bench_before_after."""\n')
    for name in BENCH_FILES:
        shutil.copy(ROOT / PACKAGE / "course" / "benchmark" / name, target / name)
    out = folder / "rows.json"
    env = dict(os.environ, PYTHONPATH=str(folder), OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    command = [sys.executable, __file__, "--side", str(folder), "--json", str(out), "--threads", str(args.threads),
               "--only", *args.only, "--batches", *map(str, args.batches)]  # fmt: skip
    if args.quick:
        command.append("--quick")
    subprocess.run(command, cwd=folder, env=env, check=True)
    return json.loads(out.read_text())


def run_side(folder: Path, args, out: Path) -> int:
    """In the side's own process: run the sections of the copied package, print their tables, save their rows."""
    import importlib

    import torch

    torch.set_num_threads(args.threads)
    package = importlib.import_module(PACKAGE)
    if not Path(package.__file__).resolve().is_relative_to(folder.resolve()):
        raise SystemExit(f"imported {package.__file__}, not the package in {folder}: is it installed elsewhere?")
    rows = {}
    for name in args.only:
        module = importlib.import_module(f"{PACKAGE}._copied.{COPY_AS}.{SECTIONS[name]}")
        kwargs = dict(QUICK[name]) if args.quick else {}
        if name == "decoding":
            kwargs["batch_sizes"] = tuple(args.batches)
        if name == "gpt_vs_nanogpt":
            kwargs["threads"] = args.threads
        table = getattr(module, name)(device="cpu", **kwargs)
        print("\n" + table.format(), flush=True)
        rows[name] = table.rows
    out.write_text(json.dumps(rows))
    return 0


def summary(results: dict[str, dict]) -> str:
    """One aligned table: section, row, figure, its value before and after, and after / before."""
    (before_label, before), (after_label, after) = results.items()
    header = ("section", "row", "figure", "before", "after", "after/before")
    lines = []
    for section, (keys, figures) in SUMMARY.items():
        if section not in before:
            continue
        for old, new in zip(before[section], after[section], strict=True):
            row = ", ".join(f"{k} {old[k]}" for k in keys)
            for figure in figures:
                a, b = old[figure], new[figure]
                lines.append((section, row, figure, f"{a:.4g}", f"{b:.4g}", f"{b / a:.2f}" if a else "-"))
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(len(header))]
    rule = "  ".join("-" * w for w in widths)
    title = f"{before_label}; {after_label}"
    table = [header, *lines]
    text = [title, rule, *("  ".join(c.rjust(w) for c, w in zip(cells, widths)) for cells in table), rule]
    text.insert(3, rule)  # under the header
    return "\n".join(text)


if __name__ == "__main__":
    sys.exit(main())
