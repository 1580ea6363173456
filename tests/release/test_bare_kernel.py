"""The distribution, and every notebook run on its own in a bare kernel from it.

A reader who downloads a notebook, or opens it on Colab or Kaggle, has a kernel with torch, numpy,
matplotlib and ipywidgets (Colab shipped ipywidgets 7.7.1 for years), and neither the repository nor the
package. This module:

1. builds the sdist and, from it, the wheel (`python -m build`, as a release would), checks both with
   `twine check`, and reads the wheel: every module of the package is in it, and its metadata has the one
   version and lower bounds only (installing the package must never replace a reader's torch);
2. makes one fresh virtual environment holding only torch (the build the tests run with), numpy, matplotlib,
   ipykernel, nbclient and ipywidgets 7.7.1, then runs the install cell of the notebooks in it, in an empty
   folder: pip finds the wheel through PIP_FIND_LINKS, as it would find it on the package index;
3. copies every notebook under chapters/ alone into an empty folder and runs it there top to bottom with
   nbclient (scripts/run_notebook.py, run by the bare environment's Python), two at a time, on PyTorch's
   generic CPU kernels (ATEN_CPU_CAPABILITY=default: a third kernel path beside this CPU's own and the
   second one of scripts/test.sh). Outputs are not compared (nbval does that, under ipywidgets 8, in the
   main run): every notebook must complete, with errors only in the cells tagged raises-exception, so the
   chapters' assertions hold on the generic kernels too.
"""

from __future__ import annotations

import concurrent.futures
import email.parser
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
import torch

import transformer_course

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
# torch: the very build the tests run with (here the CPU wheel pip already found for them); ipykernel<7 as
# in requirements.txt (7.x has been seen to freeze here).
BARE_PACKAGES = [f"torch=={torch.__version__}", "numpy", "matplotlib", "ipykernel<7", "nbclient"]
# Only the kernel side of ipywidgets 7.7.1: its front-end extensions (widgetsnbextension, which pulls in
# the classic Notebook 6 and dozens of packages, and jupyterlab_widgets) are never imported by a kernel.
IPYWIDGETS_7 = ["ipywidgets==7.7.1", "ipython-genutils"]
PARALLEL = 2
CELL_TIMEOUT_S = 600

pytestmark = pytest.mark.timeout(3600)


def ids(path: Path) -> str:
    return str(path.relative_to(ROOT / "chapters"))


def run(command: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, built as a release would build them."""
    out = tmp_path_factory.mktemp("dist")
    result = run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    (path,) = dist.glob("*.whl")
    return path


def test_build_makes_an_sdist_and_a_wheel_that_twine_accepts(dist):
    files = sorted(p.name for p in dist.iterdir())
    version = transformer_course.__version__
    assert files == [f"transformer_course-{version}-py3-none-any.whl", f"transformer_course-{version}.tar.gz"]
    result = run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_wheel_holds_every_module_of_the_package(wheel):
    in_repository = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "transformer_course").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert in_repository <= in_wheel, f"missing from the wheel: {sorted(in_repository - in_wheel)}"


def test_wheel_metadata_has_the_version_and_lower_bounds_only(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    assert metadata["Version"] == transformer_course.__version__
    requires = metadata.get_all("Requires-Dist")
    runtime = [r for r in requires if "extra ==" not in r]
    names = {re.match(r"[A-Za-z0-9_.-]+", r).group() for r in runtime}
    assert names == {"torch", "numpy", "tqdm", "sacrebleu", "regex"}
    assert not [r for r in runtime if "<" in r or "==" in r], f"upper bounds or pins in the wheel: {runtime}"
    assert set(metadata.get_all("Provides-Extra")) >= {"notebooks", "lab", "book", "test"}
    notebooks_extra = [r for r in requires if "extra == 'notebooks'" in r or 'extra == "notebooks"' in r]
    assert any(r.startswith("ipywidgets>=7.7") for r in notebooks_extra), notebooks_extra


def bare_environment(find_links: Path) -> dict[str, str]:
    """The environment of a reader's kernel: no PYTHONPATH into the repository; pip also looks in find_links."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_FIND_LINKS"] = " ".join(filter(None, [str(find_links), os.environ.get("PIP_FIND_LINKS")]))
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env["ATEN_CPU_CAPABILITY"] = "default"  # the generic kernels: the chapters' assertions must hold there too
    return env


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A fresh virtual environment with the packages a reader's kernel has, and not the course's."""
    venv = tmp_path_factory.mktemp("bare-venv")
    result = run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    assert result.returncode == 0, result.stderr
    python = venv / "bin" / "python"
    for packages in (BARE_PACKAGES, ["--no-deps", *IPYWIDGETS_7]):
        result = run([str(python), "-m", "pip", "install", "--quiet", *packages], timeout=900)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return python


@pytest.fixture(scope="module")
def install_cell_run(bare_python, wheel, tmp_path_factory):
    """The install cell, run by the bare environment's Python in an empty folder, twice."""
    cell = next(c for c in nbformat.read(NOTEBOOKS[0], as_version=4).cells if c.cell_type == "code")
    folder = tmp_path_factory.mktemp("empty")
    env = bare_environment(wheel.parent)
    runs = [run([str(bare_python), "-c", cell.source], timeout=900, cwd=folder, env=env) for _ in range(2)]
    where = run(
        [str(bare_python), "-c", "import transformer_course as tc; print(tc.__version__, tc.__file__)"],
        timeout=120,
        cwd=folder,
        env=env,
    )
    return runs, where


def test_install_cell_installs_the_wheel_then_does_nothing(install_cell_run, bare_python):
    (first, second), where = install_cell_run
    assert first.returncode == 0, first.stdout + first.stderr
    version = transformer_course.__version__
    assert f"transformer_course {version} is installed." in first.stdout
    assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
    installed_version, installed_file = where.stdout.split()
    assert installed_version == version
    assert Path(installed_file).is_relative_to(bare_python.parent.parent), "imported from outside the bare venv"


@pytest.fixture(scope="module")
def bare_runs(request, bare_python, install_cell_run, wheel, tmp_path_factory):
    """Every selected notebook (all, unless -k says otherwise), copied alone into an empty folder and run
    there: path -> (returncode, output, seconds)."""
    env = bare_environment(wheel.parent)
    selected = [
        item.callspec.params["path"]
        for item in request.session.items
        # nbval's notebook cells are items too, without `originalname`.
        if getattr(item, "originalname", None) == "test_notebook_runs_alone_in_a_bare_kernel"
    ]
    folders = {path: tmp_path_factory.mktemp(path.stem) for path in selected}

    def run_alone(path: Path):
        folder = folders[path]
        copy = folder / path.name
        shutil.copyfile(path, copy)
        command = [str(bare_python), str(ROOT / "scripts" / "run_notebook.py"), f"--timeout={CELL_TIMEOUT_S}"]
        start = time.perf_counter()
        result = run([*command, copy.name], timeout=3 * CELL_TIMEOUT_S, cwd=folder, env=env)
        return result.returncode, result.stdout + result.stderr, time.perf_counter() - start

    # The longest notebooks (the most code cells) first, so that both workers finish at about the same time.
    def n_code_cells(path: Path) -> int:
        return sum(cell.cell_type == "code" for cell in nbformat.read(path, as_version=4).cells)

    order = sorted(selected, key=n_code_cells, reverse=True)
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        return dict(zip(order, pool.map(run_alone, order)))


def test_bare_kernel_has_ipywidgets_7(bare_python, tmp_path):
    probe = "import ipywidgets; print(ipywidgets.__version__, hasattr(ipywidgets, 'Stack'))"
    result = run([str(bare_python), "-c", probe], timeout=120, cwd=tmp_path)
    assert result.stdout.split() == ["7.7.1", "False"], result.stdout + result.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_runs_alone_in_a_bare_kernel(bare_runs, path):
    returncode, output, seconds = bare_runs[path]
    assert returncode == 0, f"{path.name} failed after {seconds:.0f} s:\n{output[-6000:]}"
