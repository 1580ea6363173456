"""Execute notebooks top to bottom in a fresh kernel and save them in place, outputs and widget state included.

    .venv/bin/python scripts/run_notebook.py chapters/01_mlp.ipynb [more.ipynb ...]

This is how every notebook of the course is committed: execution counts 1, 2, 3, ... with no gaps,
the state of every ipywidgets widget saved (the book displays widgets from it), no timing metadata.
The kernel runs in the notebook's folder with one thread per library, like the tests.
A cell may raise only if it is tagged `raises-exception`; any other error stops and saves nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import ipykernel.kernelspec
import nbformat
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


class CurrentPythonKernels(KernelSpecManager):
    """Every kernel name means this Python (like nbval's --nbval-current-env), never another installed kernel."""

    def get_kernel_spec(self, kernel_name):
        return self.kernel_spec_class(
            resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict()
        )


def first_heading_is_h1(nb: nbformat.NotebookNode) -> bool:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.strip():
            return cell.source.lstrip().startswith("# ")
        if cell.cell_type == "code":
            return False
    return False


def run(path: Path, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    if not first_heading_is_h1(nb):
        raise SystemExit(f"{path}: the first cell must be markdown starting with an H1 title ('# ...')")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    start = time.perf_counter()
    client = NotebookClient(
        nb,
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    client.km = KernelManager(kernel_name="python3", kernel_spec_manager=CurrentPythonKernels())
    client.execute()
    elapsed = time.perf_counter() - start
    nb.metadata.pop("papermill", None)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=300, help="seconds allowed per cell (default 300)")
    args = parser.parse_args()
    # The same environment as the tests: one thread per library (see scripts/test.sh).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    for path in args.notebooks:
        if path.suffix != ".ipynb" or not path.is_file():
            raise SystemExit(f"{path}: not a notebook file")
        try:
            elapsed = run(path, args.timeout)
        except CellExecutionError as error:
            print(f"{path}: a cell failed; the notebook was not saved.\n{error}", file=sys.stderr)
            return 1
        print(f"{path}: executed in {elapsed:.1f} s and saved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
