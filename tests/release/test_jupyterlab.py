"""An exercise notebook in a real JupyterLab reads like the book, and keeps its solutions hidden.

JupyterLab, with jupyterlab-myst as the README's set-up installs it, is started headless on a local port
with a temporary copy of the exercises of chapter 4 (the learner's kernel is this environment's Python).
Headless Chromium, driven by Playwright, opens the notebook, runs all cells from the Run menu, and takes
a screenshot (_build/screenshots/jupyterlab_exercises_04.png). Then it checks what a learner sees: every
exercise rendered as an exercise box with no MyST markup left raw, every solution cell collapsed (source
and outputs) although it ran, and no request to anywhere but the local server.

Without JupyterLab, Playwright or Chromium the test skips with the reason, except in CI (CI=true), where
that is a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from browser_needs import missing_dependency, playwright_and_chromium
from script_modules import load

ROOT = Path(__file__).resolve().parents[2]
build_pdf = load("build_pdf")  # its Chromium helpers
NOTEBOOK = ROOT / "chapters" / "exercises" / "04_multihead.ipynb"
SCREENSHOT = ROOT / "_build" / "screenshots" / "jupyterlab_exercises_04.png"
# Lines of the reference solutions of exercise 4.1, as the solution cells display them.
REFERENCE_CODE = [
    "(B, T, D) -> (B, H, T, D / H): head i gets",
    "return x.view(batch, length, n_heads, d_k).transpose(1, 2)",
]
RAW_MARKUP = [
    "```{exercise}",
    "{exercise}",
    "{solution-start}",
    "{solution-end}",
    ":label:",
    ":nonumber:",
    ":class: dropdown",
    "{ref}",
    "{doc}",
]
# JupyterLab's settings for this test: every cell in the page (no virtual scrolling, so every cell can
# be checked), and no calls home for news or updates.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False,
        "fetchNews": "false",
    },
}

pytestmark = pytest.mark.timeout(600)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a local port, serving a copy of the notebook; yields (url, token)."""
    try:
        import jupyterlab  # noqa: F401
        import jupyterlab_myst  # noqa: F401
    except ImportError as error:
        missing_dependency(f"{error.name} is not installed (pip install -e '.[lab]')")
    home = tmp_path_factory.mktemp("jupyterlab")
    notebooks = home / "notebooks"
    notebooks.mkdir()
    shutil.copyfile(NOTEBOOK, notebooks / NOTEBOOK.name)
    for name, settings in LAB_SETTINGS.items():
        path = home / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        OMP_NUM_THREADS="1",
    )
    port, token = free_port(), secrets.token_hex(16)
    command = [
        *(sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}"),
        *("--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={notebooks}"),
    ]
    log = (home / "server.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{url}api/status?token={token}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (home / "server.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, token
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


@pytest.fixture(scope="module")
def page(lab, tmp_path_factory):
    sync_playwright, chromium = playwright_and_chromium(build_pdf.chromium_path)
    url, token = lab
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium,
            headless=True,
            args=build_pdf.CHROMIUM_ARGS,
            viewport={"width": 1300, "height": 3200},
        )
        page = context.new_page()
        page.outside_requests = []

        def only_local(route):
            if route.request.url.startswith((url, "data:", "blob:")):
                route.continue_()
            else:
                page.outside_requests.append(route.request.url)
                route.abort()

        page.route("**/*", only_local)
        page.goto(f"{url}lab/tree/{NOTEBOOK.name}?token={token}")
        yield page
        context.close()


def is_solution(cell) -> bool:
    return cell.cell_type == "code" and bool(cell.metadata.get("jupyter", {}).get("source_hidden"))


def menu(page, menu_name: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=menu_name).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


def solutions_hidden(page, nb) -> list[str]:
    """What shows of the solutions: their source collapsed, their code nowhere to be read; returns the problems."""
    problems = []
    cells = page.locator(".jp-Notebook .jp-Cell")
    for i in [i for i, c in enumerate(nb.cells) if is_solution(c)]:
        if not cells.nth(i).locator(".jp-InputPlaceholder").is_visible():
            problems.append(f"cell {i}: its source is not collapsed")
        if cells.nth(i).locator(".jp-InputArea-editor").is_visible():
            problems.append(f"cell {i}: its source shows")
    shown = page.locator(".jp-Notebook").inner_text()
    for fragment in REFERENCE_CODE:
        if fragment in shown:
            problems.append(f"the reference solution shows: {fragment!r}")
    return problems


@pytest.fixture(scope="module")
def opened(page):
    """The notebook as a learner first sees it, markdown rendered; returns (notebook on disk, what showed)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    n_exercises = sum("```{exercise}" in c.source for c in nb.cells if c.cell_type == "markdown")
    # jupyterlab-myst renders the markdown cells asynchronously.
    rendered = "n => document.querySelectorAll('.jp-Notebook .myst-exercise[id]').length >= n"
    page.wait_for_function(rendered, arg=n_exercises, timeout=120_000)
    cells = page.locator(".jp-Notebook .jp-Cell")
    outputs_shown = [
        i for i, c in enumerate(nb.cells) if is_solution(c) and cells.nth(i).locator(".jp-OutputArea").is_visible()
    ]
    return nb, {"solutions": solutions_hidden(page, nb), "outputs_shown": outputs_shown}


@pytest.fixture(scope="module")
def ran_all(page, opened):
    """Then: outputs cleared (Edit menu) and every cell run from the Run menu; returns the notebook on disk."""
    nb = opened[0]
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    menu(page, "Edit", "Clear Outputs of All Cells")
    menu(page, "Run", "Run All Cells")
    # Done when every code cell whose source shows has its execution count, in order (a collapsed cell
    # shows no prompt, but uses up its count): 1, 2, ... with gaps where the solutions are.
    code = [c for c in nb.cells if c.cell_type == "code"]
    expected = [f"[{n}]:" for n, c in enumerate(code, start=1) if not is_solution(c)]
    page.wait_for_function(
        """expected => {
            const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
                .map(p => p.textContent.trim()).filter(t => t);
            return JSON.stringify(prompts) === JSON.stringify(expected);
        }""",
        arg=expected,
        timeout=300_000,
    )
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    return nb


def test_solutions_are_collapsed_when_the_notebook_opens(opened):
    seen = opened[1]
    assert seen["solutions"] == []
    assert seen["outputs_shown"] == [], "saved outputs of solution cells show"


def test_exercise_notebook_runs_in_jupyterlab(page, ran_all):
    cells = page.locator(".jp-Notebook .jp-Cell")
    # The checker of every reference solution ran and passed, in its collapsed cell.
    checkers = [i for i, c in enumerate(ran_all.cells) if is_solution(c) and c.source.startswith("check.")]
    assert checkers
    for i in checkers:
        assert "✅" in cells.nth(i).locator(".jp-OutputArea").text_content(), f"cell {i}: {ran_all.cells[i].source}"
    assert page.outside_requests == [], page.outside_requests


def test_no_raw_markup_shows(page, ran_all):
    shown = page.locator(".jp-Notebook").inner_text()
    assert not [raw for raw in RAW_MARKUP if raw in shown], [raw for raw in RAW_MARKUP if raw in shown]
    n_exercises = sum("```{exercise}" in c.source for c in ran_all.cells if c.cell_type == "markdown")
    titles = page.locator(".jp-Notebook .myst-exercise[id] .myst-exercise-title").all_inner_texts()
    assert len(titles) == n_exercises and all(t.startswith("Exercise") for t in titles), titles


def test_solutions_stay_collapsed_after_run_all(page, ran_all):
    assert solutions_hidden(page, ran_all) == []
    # The code is there, folded: one click shows it.
    page.locator(".jp-OutputArea summary", has_text="The reference solution").first.click()
    assert REFERENCE_CODE[0] in page.locator(".jp-Notebook").inner_text()
